#ifndef CORESCAPE_SCHEDULER_EVENT_LOG_H_
#define CORESCAPE_SCHEDULER_EVENT_LOG_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "corescape/v1/common.pb.h"
#include "runtime/base/clock.h"
#include "scheduler/state_store.h"

namespace corescape::scheduler {

// The cluster's recent history: every node and job transition, numbered,
// persisted (bounded to `capacity`), and watchable.
class EventLog {
 public:
  EventLog(const Clock* clock, StateStore* store, int capacity = 1000);

  // Restores persisted events so numbering continues after a restart.
  absl::Status Load();

  // Records an event. Persistence errors are logged, not returned: an event
  // describes a transition that has already been made durable elsewhere.
  v1::ClusterEvent Append(v1::ClusterEvent::Kind kind,
                          const std::string& node_name,
                          const std::string& job_id,
                          const std::string& message);

  // Events with sequence > after, oldest first.
  std::vector<v1::ClusterEvent> After(uint64_t after, int limit = 1000) const;
  std::vector<v1::ClusterEvent> Newest(int count) const;

  // Blocks until an event with sequence > after exists or timeout passes.
  bool WaitForEventsAfter(uint64_t after, absl::Duration timeout) const;

 private:
  const Clock* clock_;
  StateStore* store_;
  const int capacity_;
  mutable absl::Mutex mu_;
  std::deque<v1::ClusterEvent> events_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_EVENT_LOG_H_
