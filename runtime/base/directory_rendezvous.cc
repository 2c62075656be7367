#include "runtime/base/directory_rendezvous.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/base/atomic_file.h"

namespace corescape {

absl::StatusOr<std::vector<std::string>> RendezvousThroughDirectory(
    const std::string& dir, int rank, int world, const std::string& address,
    absl::Duration timeout, bool publish) {
  auto path = [&dir](int r) { return absl::StrCat(dir, "/rank", r, ".addr"); };
  if (publish) {
    if (absl::Status s = WriteFileAtomically(path(rank), address); !s.ok()) return s;
  }
  std::vector<std::string> addresses(world);
  const absl::Time deadline = absl::Now() + timeout;
  for (int r = 0; r < world; ++r) {
    while (true) {
      absl::StatusOr<std::string> published = ReadFileToString(path(r));
      if (published.ok() && !published->empty()) {
        addresses[r] = *std::move(published);
        break;
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("rank ", r, " never published its address in ", dir));
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  return addresses;
}

}  // namespace corescape
