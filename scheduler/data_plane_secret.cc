#include "scheduler/data_plane_secret.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/secrets.h"

namespace corescape::scheduler {

absl::StatusOr<std::string> NewJobSecret() { return NewHexSecret(); }

std::string GenerationSecret(absl::string_view job_secret, uint64_t generation) {
  return absl::BytesToHexString(
      HmacSha256(job_secret, absl::StrCat("corescape.v1 data plane, generation ", generation)));
}

}  // namespace corescape::scheduler
