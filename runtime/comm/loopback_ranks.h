#ifndef CORESCAPE_RUNTIME_COMM_LOOPBACK_RANKS_H_
#define CORESCAPE_RUNTIME_COMM_LOOPBACK_RANKS_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"

namespace corescape::comm {

// `world` ranks of one communicator inside one process, for tests and
// benchmarks: each rank gets its own UCX transport on loopback and its own
// thread, exactly as separate processes would, and runs body(rank, its
// communicator). Returns once every body has returned; the error is the
// first transport or communicator that could not be built (those ranks'
// bodies do not run).
absl::Status RunLoopbackRanks(
    int world, const std::string& job_id,
    const std::function<void(int rank, std::unique_ptr<Communicator> communicator)>& body,
    absl::Duration timeout = absl::Seconds(20));

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_LOOPBACK_RANKS_H_
