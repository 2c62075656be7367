#ifndef CORESCAPE_SCHEDULER_DATA_PLANE_SECRET_H_
#define CORESCAPE_SCHEDULER_DATA_PLANE_SECRET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::scheduler {

// A job's secret: 256 bits from the kernel's CSPRNG, made at submission and
// persisted with the job; it never leaves the scheduler.
absl::StatusOr<std::string> NewJobSecret();

// What the members of one generation share on the data plane (their
// JobAssignment.data_plane_token): HMAC-SHA256(job secret, generation), hex.
// Each generation gets its own, so a process of an earlier generation (or
// one that saw an earlier assignment) knows nothing that admits it to a
// later one.
std::string GenerationSecret(absl::string_view job_secret, uint64_t generation);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_DATA_PLANE_SECRET_H_
