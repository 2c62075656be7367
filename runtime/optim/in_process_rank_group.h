#ifndef CORESCAPE_RUNTIME_OPTIM_IN_PROCESS_RANK_GROUP_H_
#define CORESCAPE_RUNTIME_OPTIM_IN_PROCESS_RANK_GROUP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "runtime/optim/rank_group.h"

namespace corescape::optim {

// Where the P in-process ranks meet. Each rank runs on its own thread and
// issues collectives through its InProcessRankGroup; the k-th collective of
// every rank forms one operation. Contributions are copied in at the start,
// the last rank to arrive computes the result once (sums in rank order
// 0..P−1, so it is deterministic and the same on every rank), and each rank
// copies it out on Wait. A mismatch (kind or size) fails the operation on
// every rank.
class InProcessHub {
 public:
  explicit InProcessHub(int world_size);
  int world_size() const { return world_size_; }

  // Fails every pending and future collective with `status` (a rank that
  // stopped early would otherwise leave the others waiting forever).
  void Abort(absl::Status status);

 private:
  friend class InProcessRankGroup;
  enum class Kind { kAllReduceSum, kAllGatherV };
  struct Operation {
    Kind kind;
    std::vector<int64_t> sizes;              // floats (reduce) or bytes per rank (gather)
    std::vector<std::vector<char>> inputs;   // per rank
    std::vector<char> result;
    int arrived = 0;
    int collected = 0;
    absl::Status status;
  };

  // Adds rank's contribution to operation `sequence`.
  void Contribute(int64_t sequence, int rank, Kind kind, std::vector<int64_t> sizes,
                  const void* data, int64_t bytes);
  // Blocks until operation `sequence` is complete and copies the result out.
  absl::Status Collect(int64_t sequence, int rank, void* out, int64_t out_bytes);

  const int world_size_;
  absl::Mutex mutex_;
  std::map<int64_t, Operation> operations_ ABSL_GUARDED_BY(mutex_);
  absl::Status aborted_ ABSL_GUARDED_BY(mutex_);
};

// One rank's view of an InProcessHub. Bytes are counted as a ring algorithm
// would move them: all-reduce of n floats sends 2n − c_{r+1} − c_{r+2}
// floats (c_i: ring chunk i), all-gather-v sends every block except the next
// rank's. Not thread-safe: one thread per rank.
class InProcessRankGroup final : public RankGroup {
 public:
  InProcessRankGroup(InProcessHub* hub, int rank);

  int rank() const override { return rank_; }
  int world_size() const override { return hub_->world_size(); }
  absl::Status AllReduceSum(float* data, int64_t count) override;
  absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                          absl::Span<const int64_t> bytes_per_rank) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGatherV(
      const void* send, int64_t send_bytes, void* recv,
      absl::Span<const int64_t> bytes_per_rank) override;
  int64_t bytes_sent() const override { return bytes_sent_; }
  int64_t bytes_received() const override { return bytes_received_; }

  // Ring byte counts, exposed for tests and reports.
  static int64_t RingAllReduceBytesSent(int64_t count, int world_size, int rank);
  static int64_t RingAllGatherBytesSent(absl::Span<const int64_t> bytes_per_rank, int rank);

 private:
  InProcessHub* hub_;
  int rank_;
  int64_t next_sequence_ = 0;
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

// Runs body(rank, group) on P threads, one per rank, over a fresh hub, and
// returns the first non-OK status (by rank).
absl::Status RunInProcessRanks(int world_size,
                               const std::function<absl::Status(int, RankGroup&)>& body);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_IN_PROCESS_RANK_GROUP_H_
