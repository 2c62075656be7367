#ifndef CORESCAPE_RUNTIME_ATTENTION_IN_PROCESS_ATTENTION_CLUSTER_H_
#define CORESCAPE_RUNTIME_ATTENTION_IN_PROCESS_ATTENTION_CLUSTER_H_

// Workers and attention servers of one job inside one process, for tests
// and benchmarks: every rank gets its own UCX transport on loopback and its
// own thread, exactly as separate daemons would.

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/attention/attention_server_session.h"
#include "runtime/attention/disaggregated_core_attention.h"

namespace corescape::attention {

struct InProcessAttentionCluster {
  int workers = 1;
  int servers = 1;
  // workers, servers and on_exchange_event are filled in per worker.
  DisaggregatedOptions options;
  // Each worker's exchange events (DisaggregatedOptions::on_exchange_event),
  // on that worker's thread; may be empty.
  std::function<void(int worker, const ExchangeEvent&)> on_exchange_event;
  // Each server's queue depth (ServerSessionOptions::on_queue_depth), on
  // that server's thread; may be empty.
  std::function<void(int server, int32_t queued_requests)> on_queue_depth;
};

struct ServerOutcome {
  absl::Status served;  // what AttentionServerSession::Serve returned
  ServerSessionStats stats;
};

// Runs `worker_body(worker, executor)` on every worker rank while every
// server serves; returns once all are done. Fails only when the cluster
// could not be built (transports, communicators, executors).
absl::StatusOr<std::vector<ServerOutcome>> RunInProcessAttentionCluster(
    const InProcessAttentionCluster& cluster,
    const std::function<void(int worker, DisaggregatedCoreAttention& executor)>& worker_body);

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_IN_PROCESS_ATTENTION_CLUSTER_H_
