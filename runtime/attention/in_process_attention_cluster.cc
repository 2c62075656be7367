#include "runtime/attention/in_process_attention_cluster.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/transport.h"

namespace corescape::attention {

absl::StatusOr<std::vector<ServerOutcome>> RunInProcessAttentionCluster(
    const InProcessAttentionCluster& cluster,
    const std::function<void(int worker, DisaggregatedCoreAttention& executor)>& worker_body) {
  const int world = cluster.workers + cluster.servers;
  std::vector<std::unique_ptr<comm::Transport>> transports;
  std::vector<std::string> addresses;
  for (int r = 0; r < world; ++r) {
    comm::TransportOptions options;
    options.listen_address = "127.0.0.1:0";
    auto transport = comm::Transport::Create(options);
    if (!transport.ok()) return transport.status();
    addresses.push_back((*transport)->address());
    transports.push_back(*std::move(transport));
  }
  absl::Mutex mu;
  absl::Status setup_error;
  auto record = [&](absl::Status status) {
    absl::MutexLock lock(&mu);
    if (setup_error.ok()) setup_error = std::move(status);
  };
  std::vector<ServerOutcome> outcomes(cluster.servers);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      comm::CommunicatorOptions o;
      o.rank = r;
      o.world_size = world;
      o.generation = 1;
      o.peer_addresses = addresses;
      o.secret_token = "token";
      o.job_id = "in-process/attn";
      o.timeout = absl::Seconds(20);
      auto communicator = comm::Communicator::Create(transports[r].get(), o);
      if (!communicator.ok()) return record(communicator.status());
      if (r < cluster.workers) {
        DisaggregatedOptions options = cluster.options;
        options.workers = cluster.workers;
        options.servers = cluster.servers;
        if (cluster.on_exchange_event) {
          options.on_exchange_event = [&cluster, r](const ExchangeEvent& event) {
            cluster.on_exchange_event(r, event);
          };
        }
        auto executor = DisaggregatedCoreAttention::Create(*std::move(communicator), options);
        if (!executor.ok()) return record(executor.status());
        worker_body(r, **executor);
        return;
      }
      ServerSessionOptions options;
      options.workers = cluster.workers;
      options.servers = cluster.servers;
      options.tolerance = cluster.options.tolerance;
      options.planner = cluster.options.planner;
      options.keep_qkv_for_backward = cluster.options.keep_qkv_for_backward;
      AttentionServerSession session(communicator->get(), options);
      outcomes[r - cluster.workers].served = session.Serve();
      outcomes[r - cluster.workers].stats = session.stats();
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (!setup_error.ok()) return setup_error;
  return outcomes;
}

}  // namespace corescape::attention
