#include "scheduler/fault_injecting_state_store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace corescape::scheduler {
namespace {

absl::Status DiskFull(absl::string_view kind) {
  return absl::ResourceExhaustedError(
      absl::StrCat("injected fault: no space left on device (writing ", kind, ")"));
}

}  // namespace

void FaultInjectingStateStore::FailWrites(int count, std::string kind) {
  absl::MutexLock lock(&mu_);
  remaining_ = count;
  kind_ = std::move(kind);
}

int FaultInjectingStateStore::refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

bool FaultInjectingStateStore::Refuses(const std::vector<absl::string_view>& kinds) {
  absl::MutexLock lock(&mu_);
  if (remaining_ == 0) return false;
  bool matches = kind_.empty();
  for (absl::string_view kind : kinds) matches = matches || kind == kind_;
  if (!matches) return false;
  if (remaining_ > 0) --remaining_;
  ++refused_;
  return true;
}

absl::Status FaultInjectingStateStore::Put(absl::string_view kind, absl::string_view key,
                                           absl::string_view value) {
  if (Refuses({kind})) return DiskFull(kind);
  return inner_->Put(kind, key, value);
}

absl::Status FaultInjectingStateStore::Delete(absl::string_view kind, absl::string_view key) {
  if (Refuses({kind})) return DiskFull(kind);
  return inner_->Delete(kind, key);
}

absl::Status FaultInjectingStateStore::WriteBatch(const std::vector<StoreWrite>& writes) {
  std::vector<absl::string_view> kinds;
  for (const StoreWrite& write : writes) kinds.push_back(write.kind);
  if (Refuses(kinds)) return DiskFull(absl::StrJoin(kinds, ", "));
  return inner_->WriteBatch(writes);
}

absl::Status FaultInjectingStateStore::TrimToNewest(absl::string_view kind, int keep) {
  if (Refuses({kind})) return DiskFull(kind);
  return inner_->TrimToNewest(kind, keep);
}

}  // namespace corescape::scheduler
