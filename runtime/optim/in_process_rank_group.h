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
#include "absl/types/span.h"
#include "runtime/optim/rank_group.h"

namespace corescape::optim {

// Payloads of an all-reduce up to this many bytes are summed in the data
// plane's recursive-doubling order, larger ones in its ring order. Must equal
// the default comm::AlgorithmSettings::small_bytes (runtime/comm), which the
// workers' communicators use; tests/scape checks both.
inline constexpr int64_t kDataPlaneSmallAllReduceBytes = 64 << 10;

// Element-wise sum of `inputs` (one buffer of `count` floats per rank, in
// rank order) into `out`, adding in exactly the order the data plane's CPU
// all-reduce does (runtime/comm/all_reduce_algorithm.cc), so a run here and a
// run over UCX give the same bits:
//   count·4 <= small_bytes: recursive doubling. P2 = the largest power of two
//     <= P; rank r < P − P2 first takes x_r + x_{r+P2}; then for
//     mask = 1, 2, ..., P2/2 partners r and r^mask both form
//     (lower rank's value) + (higher rank's value).
//   larger: ring. The buffer is cut into P balanced chunks (the first
//     count % P one float longer); chunk c is summed along the ring starting
//     at rank c+1: ((x_{c+1} + x_{c+2}) + ...) + x_c (indices mod P).
// P = 1 copies. `out` may alias none of the inputs.
void SumInDataPlaneOrder(absl::Span<const float* const> inputs, int64_t count, float* out,
                         int64_t small_bytes = kDataPlaneSmallAllReduceBytes);

// Where the P in-process ranks meet. Each rank runs on its own thread and
// issues collectives through its InProcessRankGroup; the k-th collective of
// every rank forms one operation. Contributions are copied in at the start,
// the last rank to arrive computes the result once (SumInDataPlaneOrder, so
// it is deterministic, the same on every rank and the same bits as the UCX
// data plane's all-reduce), and each rank copies it out on Wait. A mismatch
// (kind or size) fails the operation on every rank.
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
// rank's. (The data plane moves the same bytes for all-reduces over 64 KiB;
// small ones use recursive doubling and small all-gathers go direct, which
// count differently: docs/data_plane.md.) Not thread-safe: one thread per
// rank.
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
  // Read from any thread while a collective on another (a mask exchange's)
  // counts.
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
};

// Runs body(rank, group) on P threads, one per rank, over a fresh hub, and
// returns the first non-OK status (by rank).
absl::Status RunInProcessRanks(int world_size,
                               const std::function<absl::Status(int, RankGroup&)>& body);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_IN_PROCESS_RANK_GROUP_H_
