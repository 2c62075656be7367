#include "tools/scape/timed_rank_group.h"

#include <thread>
#include <utility>

#include "absl/time/clock.h"

namespace corescape::scape_tool {

class TimedPending final : public optim::PendingCollective {
 public:
  TimedPending(TimedRankGroup* group, std::unique_ptr<optim::PendingCollective> inner)
      : group_(group), inner_(std::move(inner)) {}
  absl::Status Wait() override {
    const absl::Time start = absl::Now();
    absl::Status status = inner_->Wait();
    group_->CountBlocked(start);
    return status;
  }

 private:
  TimedRankGroup* group_;
  std::unique_ptr<optim::PendingCollective> inner_;
};

void TimedRankGroup::CountBlocked(absl::Time since) {
  // Another thread (the mask exchange's) runs beside the rank's: its waits
  // block nothing of the step's.
  if (std::this_thread::get_id() == owner_) blocked_ += absl::Now() - since;
}

absl::Status TimedRankGroup::AllReduceSum(float* data, int64_t count) {
  const absl::Time start = absl::Now();
  absl::Status status = inner_->AllReduceSum(data, count);
  CountBlocked(start);
  return status;
}

absl::Status TimedRankGroup::AllGatherV(const void* send, int64_t send_bytes, void* recv,
                                        absl::Span<const int64_t> bytes_per_rank) {
  const absl::Time start = absl::Now();
  absl::Status status = inner_->AllGatherV(send, send_bytes, recv, bytes_per_rank);
  CountBlocked(start);
  return status;
}

absl::StatusOr<std::unique_ptr<optim::PendingCollective>> TimedRankGroup::StartAllGatherV(
    const void* send, int64_t send_bytes, void* recv, absl::Span<const int64_t> bytes_per_rank) {
  const absl::Time start = absl::Now();
  auto pending = inner_->StartAllGatherV(send, send_bytes, recv, bytes_per_rank);
  CountBlocked(start);
  if (!pending.ok()) return pending.status();
  return std::unique_ptr<optim::PendingCollective>(
      new TimedPending(this, *std::move(pending)));
}

}  // namespace corescape::scape_tool
