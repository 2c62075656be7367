// A worker's or attention server's Prometheus metrics: its membership as
// its agent sees it at scrape time, what it reports to the scheduler as the
// reports go out (the attention server's task timings, job failures), and
// what its job runners observe (RunMetrics): every rank's steps, checkpoint
// writes, the attention server's traffic.
#ifndef CORESCAPE_DAEMON_NODE_METRICS_H_
#define CORESCAPE_DAEMON_NODE_METRICS_H_

#include <string>

#include "corescape/v1/common.pb.h"
#include "corescape/v1/node.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "daemon/node_agent.h"
#include "daemon/run_metrics.h"
#include "runtime/metrics/metrics_endpoint.h"

namespace corescape {

class NodeMetrics : public RunMetrics {
 public:
  NodeMetrics(metrics::MetricsEndpoint* endpoint, v1::NodeRole role, const std::string& name);

  // Reads `agent` at every scrape: the endpoint must stop serving before
  // the agent goes away.
  void WatchAgent(const NodeAgent* agent);

  // Every message the agent is given to send (NodeAgentOptions::on_send).
  // Step reports are left to ObserveStep, which sees every rank's.
  void OnSend(const v1::NodeMessage& message);

  void ObserveStep(const v1::StepReport& report, double density, int64_t mask_bytes) override;
  void ObserveCheckpoint(const std::string& job_id, double seconds) override;
  void ObserveAttention(const std::string& job_id, int64_t bytes_in, int64_t bytes_out) override;
  void ObserveAttentionQueue(const std::string& job_id, int32_t queued_requests) override;
  void WatchDataPlane(const comm::Transport* transport) override;

 private:
  void OnAttentionTiming(const v1::AttentionTaskTiming& timing);

  metrics::MetricsEndpoint* endpoint_;
  const std::string role_;
  const std::string name_;
  prometheus::Family<prometheus::Counter>& steps_;
  prometheus::Family<prometheus::Gauge>& step_;
  prometheus::Family<prometheus::Gauge>& loss_;
  prometheus::Family<prometheus::Gauge>& validation_loss_;
  prometheus::Family<prometheus::Gauge>& tokens_per_second_;
  prometheus::Family<prometheus::Gauge>& model_tflops_per_second_;
  prometheus::Family<prometheus::Gauge>& mfu_;
  prometheus::Family<prometheus::Counter>& bytes_sent_;
  prometheus::Family<prometheus::Counter>& bytes_received_;
  prometheus::Family<prometheus::Histogram>& compute_seconds_;
  prometheus::Family<prometheus::Histogram>& communication_seconds_;
  prometheus::Family<prometheus::Gauge>& density_;
  prometheus::Family<prometheus::Counter>& mask_bytes_;
  prometheus::Family<prometheus::Gauge>& checkpoint_step_;
  prometheus::Family<prometheus::Histogram>& checkpoint_write_seconds_;
  prometheus::Family<prometheus::Counter>& job_failures_;
  prometheus::Family<prometheus::Counter>& attention_micro_batches_;
  prometheus::Family<prometheus::Counter>& attention_flops_;
  prometheus::Family<prometheus::Counter>& attention_kernel_seconds_;
  prometheus::Family<prometheus::Counter>& attention_bytes_received_;
  prometheus::Family<prometheus::Counter>& attention_bytes_sent_;
  prometheus::Family<prometheus::Gauge>& attention_queue_depth_;
};

}  // namespace corescape

#endif  // CORESCAPE_DAEMON_NODE_METRICS_H_
