#ifndef CORESCAPE_RUNTIME_BASE_DIRECTORY_RENDEZVOUS_H_
#define CORESCAPE_RUNTIME_BASE_DIRECTORY_RENDEZVOUS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace corescape {

// Data-plane addresses of `world` processes started together without a
// scheduler (tests, tools, benchmarks): rank r writes its address to
// DIR/rank<r>.addr (atomically) unless `publish` is false (it rejoins with
// the address it published before), then every rank reads all of them,
// polling until `timeout`. Returns the addresses by rank, or
// DeadlineExceeded naming the first rank that never published.
absl::StatusOr<std::vector<std::string>> RendezvousThroughDirectory(
    const std::string& dir, int rank, int world, const std::string& address,
    absl::Duration timeout, bool publish = true);

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_DIRECTORY_RENDEZVOUS_H_
