#include "runtime/attention/in_process_attention_cluster.h"

#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/loopback_ranks.h"

namespace corescape::attention {

absl::StatusOr<std::vector<ServerOutcome>> RunInProcessAttentionCluster(
    const InProcessAttentionCluster& cluster,
    const std::function<void(int worker, DisaggregatedCoreAttention& executor)>& worker_body) {
  absl::Mutex mu;
  absl::Status setup_error;
  std::vector<ServerOutcome> outcomes(cluster.servers);
  absl::Status ranks = comm::RunLoopbackRanks(
      cluster.workers + cluster.servers, "in-process/attn",
      [&](int r, std::unique_ptr<comm::Communicator> communicator) {
        if (r < cluster.workers) {
          DisaggregatedOptions options = cluster.options;
          options.workers = cluster.workers;
          options.servers = cluster.servers;
          if (cluster.on_exchange_event) {
            options.on_exchange_event = [&cluster, r](const ExchangeEvent& event) {
              cluster.on_exchange_event(r, event);
            };
          }
          auto executor = DisaggregatedCoreAttention::Create(std::move(communicator), options);
          if (!executor.ok()) {
            absl::MutexLock lock(&mu);
            if (setup_error.ok()) setup_error = executor.status();
            return;
          }
          worker_body(r, **executor);
          return;
        }
        ServerSessionOptions options;
        options.workers = cluster.workers;
        options.servers = cluster.servers;
        options.tolerance = cluster.options.tolerance;
        options.planner = cluster.options.planner;
        options.keep_qkv_for_backward = cluster.options.keep_qkv_for_backward;
        if (cluster.on_queue_depth) {
          options.on_queue_depth = [&cluster, server = r - cluster.workers](int32_t queued) {
            cluster.on_queue_depth(server, queued);
          };
        }
        AttentionServerSession session(communicator.get(), options);
        outcomes[r - cluster.workers].served = session.Serve();
        outcomes[r - cluster.workers].stats = session.stats();
      });
  if (!ranks.ok()) return ranks;
  if (!setup_error.ok()) return setup_error;
  return outcomes;
}

}  // namespace corescape::attention
