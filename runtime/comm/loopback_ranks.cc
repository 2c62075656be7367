#include "runtime/comm/loopback_ranks.h"

#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "runtime/comm/transport.h"

namespace corescape::comm {

absl::Status RunLoopbackRanks(
    int world, const std::string& job_id,
    const std::function<void(int rank, std::unique_ptr<Communicator> communicator)>& body,
    absl::Duration timeout) {
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::string> addresses;
  for (int r = 0; r < world; ++r) {
    TransportOptions options;
    options.listen_address = "127.0.0.1:0";
    auto transport = Transport::Create(options);
    if (!transport.ok()) return transport.status();
    addresses.push_back((*transport)->address());
    transports.push_back(*std::move(transport));
  }
  absl::Mutex mu;
  absl::Status setup_error;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      CommunicatorOptions options;
      options.rank = r;
      options.world_size = world;
      options.generation = 1;
      options.peer_addresses = addresses;
      options.secret_token = "token";
      options.job_id = job_id;
      options.timeout = timeout;
      auto communicator = Communicator::Create(transports[r].get(), options);
      if (!communicator.ok()) {
        absl::MutexLock lock(&mu);
        if (setup_error.ok()) setup_error = communicator.status();
        return;
      }
      body(r, *std::move(communicator));
    });
  }
  for (std::thread& thread : threads) thread.join();
  return setup_error;
}

}  // namespace corescape::comm
