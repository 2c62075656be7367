#ifndef CORESCAPE_TOOLS_SCAPE_TIMED_RANK_GROUP_H_
#define CORESCAPE_TOOLS_SCAPE_TIMED_RANK_GROUP_H_

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/time/time.h"
#include "runtime/optim/rank_group.h"
#include "runtime/train/data_parallel_group.h"

namespace corescape::scape_tool {

// A RankGroup that forwards to another and adds up the wall time the rank's
// thread (the one that made it) spends blocked in collectives: blocking
// calls whole, asynchronous ones from the start call and from Wait(). Calls
// on other threads (a mask exchange's) overlap the rank's and are not
// counted. This is the communication time a step could not hide behind
// compute.
// A DataParallelGroup, so the trainer can run on it.
class TimedRankGroup final : public train::DataParallelGroup {
 public:
  explicit TimedRankGroup(optim::RankGroup* inner)
      : inner_(inner), owner_(std::this_thread::get_id()) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status AllReduceSum(float* data, int64_t count) override;
  absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                          absl::Span<const int64_t> bytes_per_rank) override;
  absl::StatusOr<std::unique_ptr<optim::PendingCollective>> StartAllGatherV(
      const void* send, int64_t send_bytes, void* recv,
      absl::Span<const int64_t> bytes_per_rank) override;
  int64_t bytes_sent() const override { return inner_->bytes_sent(); }
  int64_t bytes_received() const override { return inner_->bytes_received(); }

  // Total blocked time so far.
  absl::Duration blocked() const { return blocked_; }

 private:
  friend class TimedPending;
  // Adds the time since `since` where called on owner_'s thread.
  void CountBlocked(absl::Time since);

  optim::RankGroup* inner_;
  std::thread::id owner_;
  absl::Duration blocked_;  // written on owner_'s thread only
};

}  // namespace corescape::scape_tool

#endif  // CORESCAPE_TOOLS_SCAPE_TIMED_RANK_GROUP_H_
