#ifndef CORESCAPE_RUNTIME_OPTIM_SPARSE_MASK_H_
#define CORESCAPE_RUNTIME_OPTIM_SPARSE_MASK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/optim/mask_codec.h"
#include "runtime/optim/rank_group.h"

namespace corescape::optim {

// The flat buffer cut into P contiguous ranges balanced by element count
// (sizes differ by at most one, the longer ones first): the cut a ZeRO-1
// optimizer shard would use. Rank r selects mask entries only in range r.
class ParameterPartition {
 public:
  static absl::StatusOr<ParameterPartition> Balanced(int64_t total, int world_size);
  // A partition map handed out by the scheduler: `bounds` must be P + 1
  // non-decreasing offsets from 0 to `total`, every range non-empty.
  static absl::StatusOr<ParameterPartition> FromBounds(std::vector<int64_t> bounds, int64_t total,
                                                       int world_size);
  // Whole tensors dealt to ranks as contiguous runs balanced by element
  // count (the owner-rank cut of per-tensor masks): `tensor_bounds` are the
  // T + 1 tensor offsets from 0 to the buffer's size. Cut r goes to the
  // tensor boundary nearest r·total/P (the lower on a tie) that leaves every
  // rank at least one tensor; T < P is refused.
  static absl::StatusOr<ParameterPartition> TensorAligned(const std::vector<int64_t>& tensor_bounds,
                                                          int world_size);

  int world_size() const { return static_cast<int>(bounds_.size()) - 1; }
  int64_t total() const { return bounds_.back(); }
  int64_t begin(int rank) const { return bounds_[rank]; }
  int64_t end(int rank) const { return bounds_[rank + 1]; }
  int64_t size(int rank) const { return end(rank) - begin(rank); }
  int OwnerOf(int64_t index) const;
  const std::vector<int64_t>& bounds() const { return bounds_; }

 private:
  std::vector<int64_t> bounds_;  // P + 1 entries
};

// Entries a rank selects in a range of `range_size`: ceil(density·range_size),
// clamped to [0, range_size] (computed so that e.g. 0.1·10 is exactly 1).
int64_t MaskCountForRange(int64_t range_size, double density);

// How the density moves from `start` to a sparse optimizer's target over
// the first steps of a run (the authors ramp from 1 over 8–10% of it):
// d_t = start for t < start_step; then over warmup_steps steps linearly
// (start + (target − start)·p) or geometrically (start·(target/start)^p),
// p = (t − start_step)/warmup_steps; the target from then on. warmup_steps
// 0: the target at every step. A step whose density is 1 is dense.
enum class DensityShape { kLinear, kGeometric };
struct DensitySchedule {
  double start = 1.0;
  int64_t warmup_steps = 0;
  int64_t start_step = 0;
  DensityShape shape = DensityShape::kLinear;

  absl::Status Validate() const;
  std::string ToString() const;
  double At(int64_t step, double target) const;
};
// OK for a density in (0, 1] (1: dense); else INVALID_ARGUMENT "must be in
// (0, 1]", for the caller to prefix with the field's name.
absl::Status CheckDensity(double density);
// Whether a sparse optimizer synchronizes every coordinate at `step`: before
// `warmup_steps`, at a target of 1, or where the schedule puts the density
// at 1.
bool DenseBySchedule(int64_t step, int64_t warmup_steps, double target,
                     const DensitySchedule& schedule);
// "linear", "geometric".
const char* DensityShapeName(DensityShape shape);
absl::StatusOr<DensityShape> ParseDensityShape(absl::string_view name);

// Entries a per-tensor mask takes from a tensor of `numel` entries:
// max(1, floor(density·numel)), at most numel (the authors' count).
int64_t MaskCountForTensor(int64_t numel, double density);

// OK when every bound of `partition` is one of `tensor_bounds`: each rank
// then owns whole tensors. FAILED_PRECONDITION naming the first bound that
// cuts a tensor otherwise.
absl::Status CheckTensorAligned(const ParameterPartition& partition,
                                const std::vector<int64_t>& tensor_bounds);

// The k coordinates of [begin, begin + statistic.size()) with the largest
// statistic, ascending. Ties go to the lower index and NaN counts as −∞, so
// the choice is a function of the values alone. With a pool, a large range's
// passes run on its threads (the same result). A range of 2^17 entries or
// more with k ≤ n/4 is read once, keeping the entries at or above a
// threshold estimated from a sample (TopKSampleCount entries, at
// TopKSamplePosition) that k entries reach with near certainty; where
// fewer do (or far more), SelectTopKByRadix's three passes.
std::vector<int64_t> SelectTopK(absl::Span<const float> statistic, int64_t begin, int64_t k,
                                ThreadPool* pool = nullptr);
// The same selection by radix passes over the whole range: two histograms
// find the k-th largest key, a third pass takes.
std::vector<int64_t> SelectTopKByRadix(absl::Span<const float> statistic, int64_t begin, int64_t k,
                                       ThreadPool* pool = nullptr);
// SelectTopK's sample of a range of n entries: min(2^16, n/16) entries, and
// where sample j of them lies.
inline constexpr int64_t kTopKMaxSamples = 1 << 16;
int64_t TopKSampleCount(int64_t n);
int64_t TopKSamplePosition(int64_t n, int64_t samples, int64_t j);

// A mask every rank applies at one step: the union of the ranks' parts.
struct GlobalMask {
  uint64_t mask_epoch = 0;                 // the scheduler's mask epoch it belongs to
  int64_t step = -1;                       // the step it is applied at
  std::vector<std::vector<int64_t>> parts;  // rank r's sorted selection
  std::vector<int64_t> indices;             // sorted union of the parts

  bool operator==(const GlobalMask&) const = default;
};

// Where each rank's part may lie: its own partition range, or anywhere (the
// per-rank global top-k baseline, whose union grows with P: fill-in).
enum class MaskScope { kPartitioned, kWholeBuffer };

// Where a mask exchange's sending half (encoding this rank's part, the
// sizes' all-gather, starting the payloads' all-gather) runs.
enum class MaskSending {
  // In Start, on the caller's thread: for a group that carries other
  // collectives between the optimizer's steps (a trainer's token counts and
  // losses), whose order must be the same on every rank.
  kOnCaller,
  // On the exchange's thread, before it receives: Start returns at once and
  // the encoding overlaps the caller's next forward/backward too. Only for a
  // group nobody else uses between Start and Finish.
  kOnThread,
};

// What one exchange cost this rank.
struct MaskExchangeStats {
  int64_t part_bytes = 0;  // this rank's encoded part (0 in a group of one)
  MaskEncoding encoding = MaskEncoding::kBitmask;
  double encode_seconds = 0;  // encoding this rank's part (checking it, in a group of one)
  double decode_seconds = 0;  // decoding and checking every part, plus on_received
  bool encoded_on_thread = false;
  bool received_on_thread = false;
};

// Exchanges the ranks' mask parts for one step: each rank encodes its part
// (smallest encoding, change-from-previous against its part of `previous`
// when that is the step before), the sizes are all-gathered, then the
// payloads with an asynchronous all-gather-v. In a group of one nothing is
// coded or sent: the part, checked, is the mask. The receiving half runs on a
// thread of the exchange's own: it waits for the payloads, decodes and
// checks every part (a part of another mask epoch or step is refused) and
// runs the caller's `on_received` on the assembled mask, so all of it
// overlaps the caller's next forward/backward; Finish() joins it. The
// sending half runs before it, on the caller's thread or on that thread
// (MaskSending). Between Start and Finish the caller must leave `previous`
// (and whatever `on_received` reads) unchanged and issue no collective on
// the group.
class MaskExchange {
 public:
  // Work on a received mask that the step needs later (e.g. per-entry
  // tables), run on the receiving thread; its error fails Finish.
  using ReceivedHook = std::function<absl::Status(const GlobalMask&)>;

  MaskExchange(const ParameterPartition* partition, MaskScope scope,
               MaskSending sending = MaskSending::kOnCaller)
      : partition_(partition), scope_(scope), sending_(sending) {}
  ~MaskExchange();  // joins an exchange in flight
  MaskExchange(const MaskExchange&) = delete;
  MaskExchange& operator=(const MaskExchange&) = delete;

  int64_t RangeBegin(int rank) const;
  int64_t RangeEnd(int rank) const;
  // Whether the exchange in flight encodes on its thread (its costs are
  // then read after Finish).
  bool encodes_on_thread() const {
    return in_flight_ && sending_ == MaskSending::kOnThread && receiver_.joinable();
  }

  // An error of the sending half is Start's where it runs on the caller's
  // thread, Finish's where it runs on the exchange's.
  absl::Status Start(RankGroup& group, uint64_t mask_epoch, int64_t step,
                     std::vector<int64_t> own_part, const GlobalMask* previous,
                     ReceivedHook on_received = nullptr);
  bool in_flight() const { return in_flight_; }
  absl::StatusOr<GlobalMask> Finish(uint64_t expected_mask_epoch, int64_t expected_step);

  // The last exchange's costs: read after its Finish (the encoding's fields
  // also right after Start where the caller's thread encoded).
  const MaskExchangeStats& last() const { return last_; }

 private:
  // A group of one: its part is the mask, exchanged with nobody.
  bool lone_rank() const { return group_->world_size() == 1; }
  // The sending half: encode, all-gather the sizes, start the payloads'.
  absl::Status Send(bool on_thread);
  // The receiving half: wait, decode, check, on_received.
  void Receive();
  // The exchange's thread: what is left of Send, then Receive.
  void Run();

  const ParameterPartition* partition_;
  MaskScope scope_;
  MaskSending sending_;
  RankGroup* group_ = nullptr;
  std::vector<int64_t> own_part_;
  bool send_pending_ = false;  // Send has not run for the exchange in flight
  std::string send_;
  std::vector<char> recv_;
  std::vector<int64_t> sizes_;
  std::unique_ptr<PendingCollective> pending_;
  const GlobalMask* previous_ = nullptr;  // the step before's, or null
  ReceivedHook on_received_;
  uint64_t started_mask_epoch_ = 0;
  int64_t started_step_ = 0;
  bool in_flight_ = false;
  // Run() on a thread of its own; not joinable where no thread could be
  // started, and Start sends and Finish receives on the caller's.
  std::thread receiver_;
  absl::StatusOr<GlobalMask> received_;
  MaskExchangeStats last_;
};

// Decodes every rank's encoded part and checks mask epoch, step and rank:
// the receiving half of MaskExchange, public so tests can feed it bytes.
absl::StatusOr<GlobalMask> AssembleGlobalMask(const MaskExchange& ranges,
                                              absl::Span<const absl::string_view> encoded_parts,
                                              uint64_t expected_mask_epoch,
                                              int64_t expected_step,
                                              const GlobalMask* previous);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SPARSE_MASK_H_
