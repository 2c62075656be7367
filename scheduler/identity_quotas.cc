#include "scheduler/identity_quotas.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace corescape::scheduler {

IdentityQuotas::StreamSlot::~StreamSlot() {
  if (owner_ != nullptr) owner_->ReleaseWatchStream(identity_);
}

absl::StatusOr<IdentityQuotas::StreamSlot> IdentityQuotas::AcquireWatchStream(
    const std::string& identity) {
  absl::MutexLock lock(&mu_);
  int& open = watch_streams_[identity];
  if (open >= limits_.max_watch_streams) {
    return absl::ResourceExhaustedError(absl::StrCat(
        identity, " has ", open, " watch streams (WatchEvents and WatchJob) open, the most one "
        "identity may (--max_watch_streams_per_identity); close one or retry later"));
  }
  ++open;
  return StreamSlot(this, identity);
}

absl::StatusOr<IdentityQuotas::StreamSlot> IdentityQuotas::AcquireWatchStreamFrom(
    IdentityQuotas* quotas, const std::string& identity) {
  if (quotas == nullptr) return StreamSlot(nullptr, "");
  return quotas->AcquireWatchStream(identity);
}

void IdentityQuotas::ReleaseWatchStream(const std::string& identity) {
  absl::MutexLock lock(&mu_);
  auto it = watch_streams_.find(identity);
  if (it != watch_streams_.end() && --it->second <= 0) watch_streams_.erase(it);
}

absl::Status IdentityQuotas::AdmitSubmit(const std::string& identity) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  // Forget whoever has not submitted within the minute, so the map holds
  // only recent submitters.
  for (auto it = submits_.begin(); it != submits_.end();) {
    while (!it->second.empty() && it->second.front() <= now - absl::Minutes(1)) {
      it->second.pop_front();
    }
    it = it->second.empty() ? submits_.erase(it) : std::next(it);
  }
  std::deque<absl::Time>& recent = submits_[identity];
  if (static_cast<int>(recent.size()) >= limits_.max_submits_per_minute) {
    const absl::Duration wait = recent.front() + absl::Minutes(1) - now;
    return absl::ResourceExhaustedError(absl::StrCat(
        identity, " submitted ", recent.size(), " jobs in the last minute, the most one "
        "identity may (--max_submits_per_minute_per_identity); retry in ",
        absl::FormatDuration(absl::Ceil(wait, absl::Seconds(1)))));
  }
  recent.push_back(now);
  return absl::OkStatus();
}

absl::Status IdentityQuotas::CheckPendingJobs(const std::string& identity, int pending) const {
  if (pending < limits_.max_pending_jobs) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      identity, " has ", pending, " jobs PENDING, the most one identity may "
      "(--max_pending_jobs_per_identity); wait for some to start, or cancel some"));
}

}  // namespace corescape::scheduler
