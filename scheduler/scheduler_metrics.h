// The scheduler's Prometheus metrics. State (nodes, jobs and their
// progress, attention plans) is read at scrape time through the same
// in-process calls the OperatorService and JobService answer from; only what
// leaves no state behind is counted here: lease expiries and RPCs.
#ifndef CORESCAPE_SCHEDULER_SCHEDULER_METRICS_H_
#define CORESCAPE_SCHEDULER_SCHEDULER_METRICS_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "runtime/metrics/metrics_endpoint.h"
#include "scheduler/attention_planning.h"
#include "scheduler/job_manager.h"
#include "scheduler/node_registry.h"

namespace corescape::scheduler {

class SchedulerMetrics {
 public:
  // Jobs listed per job (progress gauges): the newest this many.
  static constexpr int kJobsListed = 100;

  // Registers on `endpoint`, which must stop serving before the registry,
  // jobs and planning go away. `planning` may be null.
  SchedulerMetrics(metrics::MetricsEndpoint* endpoint, const NodeRegistry* registry,
                   const JobManager* jobs, const AttentionPlanning* planning);

  void CountLeaseExpiries(int expired);

  // For grpc::ServerBuilder::experimental().SetInterceptorCreators: counts
  // every RPC by method and status code and times it.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  RpcInterceptorFactory();

 private:
  prometheus::Family<prometheus::Counter>& lease_expiries_;
  prometheus::Family<prometheus::Counter>& rpcs_;
  prometheus::Family<prometheus::Histogram>& rpc_seconds_;
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_SCHEDULER_METRICS_H_
