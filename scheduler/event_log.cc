#include "scheduler/event_log.h"

#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace corescape::scheduler {
namespace {

constexpr char kEventKind[] = "event";

// Zero-padded so that key order is sequence order.
std::string EventKey(uint64_t sequence) {
  return absl::StrFormat("%020d", sequence);
}

}  // namespace

EventLog::EventLog(const Clock* clock, StateStore* store, int capacity)
    : clock_(clock), store_(store), capacity_(capacity) {}

absl::Status EventLog::Load() {
  if (store_ == nullptr) return absl::OkStatus();
  auto records = store_->LoadAll(kEventKind);
  if (!records.ok()) return records.status();
  absl::MutexLock lock(&mu_);
  for (const auto& [key, value] : *records) {
    v1::ClusterEvent event;
    if (!event.ParseFromString(value)) {
      LOG(WARNING) << "skipping unreadable event record " << key;
      continue;
    }
    next_sequence_ = std::max(next_sequence_, event.sequence() + 1);
    events_.push_back(std::move(event));
  }
  while (static_cast<int>(events_.size()) > capacity_) events_.pop_front();
  return absl::OkStatus();
}

v1::ClusterEvent EventLog::Append(v1::ClusterEvent::Kind kind,
                                  const std::string& node_name,
                                  const std::string& job_id,
                                  const std::string& message) {
  v1::ClusterEvent event;
  event.set_kind(kind);
  event.set_node_name(node_name);
  event.set_job_id(job_id);
  event.set_message(message);
  event.set_unix_ms(absl::ToUnixMillis(clock_->Now()));
  {
    absl::MutexLock lock(&mu_);
    event.set_sequence(next_sequence_++);
    events_.push_back(event);
    while (static_cast<int>(events_.size()) > capacity_) events_.pop_front();
  }
  LOG(INFO) << "event " << event.sequence() << " "
            << v1::ClusterEvent::Kind_Name(kind) << " node=" << node_name
            << (job_id.empty() ? "" : " job=" + job_id) << ": " << message;
  if (store_ != nullptr) {
    absl::Status status =
        store_->Put(kEventKind, EventKey(event.sequence()), event.SerializeAsString());
    // Trim occasionally rather than on every append.
    if (status.ok() && event.sequence() % 100 == 0) {
      status = store_->TrimToNewest(kEventKind, capacity_);
    }
    if (!status.ok()) LOG(WARNING) << "cannot persist event: " << status;
  }
  return event;
}

std::vector<v1::ClusterEvent> EventLog::After(uint64_t after, int limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::ClusterEvent> result;
  for (const auto& event : events_) {
    if (event.sequence() > after) {
      result.push_back(event);
      if (static_cast<int>(result.size()) >= limit) break;
    }
  }
  return result;
}

std::vector<v1::ClusterEvent> EventLog::Newest(int count) const {
  absl::MutexLock lock(&mu_);
  int start = std::max(0, static_cast<int>(events_.size()) - count);
  return std::vector<v1::ClusterEvent>(events_.begin() + start, events_.end());
}

bool EventLog::WaitForEventsAfter(uint64_t after, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto has_newer = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // The newest sequence is next_sequence_ - 1 (next_sequence_ >= 1); never
    // after + 1, which wraps for after = 2^64 - 1 and would never block.
    return next_sequence_ - 1 > after;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&has_newer), timeout);
}

}  // namespace corescape::scheduler
