#ifndef CORESCAPE_SCHEDULER_FAULT_INJECTING_STATE_STORE_H_
#define CORESCAPE_SCHEDULER_FAULT_INJECTING_STATE_STORE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/state_store.h"

namespace corescape::scheduler {

// A StateStore in front of another that refuses writes on demand, the way a
// full disk does: the refused write changes nothing underneath. Reads always
// pass through.
class FaultInjectingStateStore final : public StateStore {
 public:
  explicit FaultInjectingStateStore(StateStore* inner) : inner_(inner) {}

  // Refuses the next `count` writes (a batch counts as one) of `kind`, or of
  // any kind when `kind` is empty; count < 0 refuses until Recover().
  void FailWrites(int count, std::string kind = "");
  void Recover() { FailWrites(0); }
  // Writes refused so far.
  int refused() const;

  absl::Status Put(absl::string_view kind, absl::string_view key,
                   absl::string_view value) override;
  absl::Status Delete(absl::string_view kind, absl::string_view key) override;
  absl::Status WriteBatch(const std::vector<StoreWrite>& writes) override;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> LoadAll(
      absl::string_view kind) override {
    return inner_->LoadAll(kind);
  }
  absl::Status TrimToNewest(absl::string_view kind, int keep) override;

 private:
  // Whether a write touching `kinds` is refused now (and counts it).
  bool Refuses(const std::vector<absl::string_view>& kinds);

  StateStore* const inner_;
  mutable absl::Mutex mu_;
  int remaining_ ABSL_GUARDED_BY(mu_) = 0;
  std::string kind_ ABSL_GUARDED_BY(mu_);
  int refused_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_FAULT_INJECTING_STATE_STORE_H_
