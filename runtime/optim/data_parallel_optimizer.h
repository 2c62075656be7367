#ifndef CORESCAPE_RUNTIME_OPTIM_DATA_PARALLEL_OPTIMIZER_H_
#define CORESCAPE_RUNTIME_OPTIM_DATA_PARALLEL_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/optim/adams.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/mask_codec.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/optim/rank_group.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::optim {

// Wall seconds one rank's step spent in each part of the optimizer, on the
// calling thread. Communication is all_reduce_wait and mask_wait; the rest is
// the optimizer's own work (bench/scape/step_breakdown.sh reports it).
struct OptimizerStepPhases {
  double select = 0;           // the next mask's statistic and top-k
  double encode = 0;           // mask coding on the step's path (encoding this rank's part)
  double pack = 0;             // residual update, gather at the mask, zeroing what is sent
  double all_reduce_wait = 0;  // blocked in the values (or gradient) all-reduce
  double mask_wait = 0;        // blocked in the mask exchange (sizes, payload)
  double update = 0;           // the parameter / moment update
  // Selection work done on another thread while the all-reduce and the
  // update ran: not on the step's path, so not in OwnWork().
  double select_overlapped = 0;
  // Mask coding on the mask exchange's thread while the forward/backward
  // ran: decoding the received parts (and preparing the mask for its step),
  // and encoding this rank's part where the exchange sends on that thread
  // (MaskSending::kOnThread). Not on the step's path either; what the step
  // still waited for is mask_wait.
  double coding_overlapped = 0;

  double OwnWork() const { return select + encode + pack + update; }
  // this += weight · other, field by field (means over steps or ranks).
  void AddScaled(const OptimizerStepPhases& other, double weight) {
    select += weight * other.select;
    encode += weight * other.encode;
    pack += weight * other.pack;
    all_reduce_wait += weight * other.all_reduce_wait;
    mask_wait += weight * other.mask_wait;
    update += weight * other.update;
    select_overlapped += weight * other.select_overlapped;
    coding_overlapped += weight * other.coding_overlapped;
  }
};

// What one rank's last step did and cost.
struct OptimizerStepStats {
  int64_t step = 0;              // 1-based index of the step just taken
  bool dense = true;             // every coordinate was synchronized
  int64_t synced_values = 0;     // floats in the step's value collective
  int64_t mask_entries = 0;      // entries of the mask applied (0 when dense)
  // This rank's traffic for the step: its values (and residual) collectives
  // and one mask exchange, the one the step started (the next step's mask)
  // or, where the exchange sends on its own thread between steps
  // (MaskSending::kOnThread), the one whose mask the step applied.
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t mask_part_bytes = 0;   // this rank's encoded part in that exchange
  MaskEncoding mask_encoding = MaskEncoding::kBitmask;
  // L2 norm of the synchronized gradient before clipping (optimizers that
  // clip; 0 for the others).
  double grad_norm = 0;
  OptimizerStepPhases phases;
};

// One rank's optimizer in data-parallel training: it synchronizes what it
// needs through a RankGroup and leaves the parameters bitwise identical on
// every rank. Every rank calls Step with the same lr at the same step.
class DataParallelOptimizer {
 public:
  virtual ~DataParallelOptimizer() = default;

  virtual std::string name() const = 0;

  // `grads` is this rank's gradient, scaled so that the SUM over ranks is
  // the gradient of the global mean loss (model grad_scale = 1 / tokens of
  // the global batch); it may be overwritten. `size` is the flat buffer's.
  virtual absl::Status Step(float* params, float* grads, int64_t size, double lr) = 0;

  // Everything needed to continue bitwise (waits for an in-flight mask
  // exchange first). Restore into an optimizer built with the same
  // configuration on the same rank.
  virtual absl::StatusOr<std::string> SaveState() = 0;
  virtual absl::Status RestoreState(absl::string_view state) = 0;

  virtual int64_t step_count() const = 0;
  virtual const std::vector<float>& first_moment() const = 0;

  // Threads the optimizer may use for its host loops inside Step (a
  // trainer's, idle while the optimizer steps); null: none. The results do
  // not depend on them.
  virtual void UseThreadPool(ThreadPool* pool) {}

  const OptimizerStepStats& last_step() const { return last_step_; }

 protected:
  OptimizerStepStats last_step_;
};

// The checkpoint state of the Adam-family optimizers: one format whatever
// memory holds the moments, so a state saved by an optimizer on a device
// restores into the host one and back. "v" only where has_v (AdamW),
// "residual" only where has_residual (topk-adamw).
struct AdamState {
  int64_t step = 0;
  std::vector<float> m, v, residual;
  bool has_v = false;
  bool has_residual = false;
};
std::string EncodeAdamState(absl::string_view kind, const AdamState& state);
// FAILED_PRECONDITION for another optimizer's state; the state reader's
// error (naming the field) for a malformed one or buffers not of `size`.
absl::StatusOr<AdamState> DecodeAdamState(absl::string_view blob, absl::string_view kind,
                                          int64_t size, bool has_v, bool has_residual);

// 1 for the entries that take weight decay (matrices), 0 for the rest.
using DecayMask = std::vector<uint8_t>;

// Dense AdamW: all-reduce the gradient (N floats), clip its global L2 norm
// to grad_clip (<= 0: no clip), then AdamW on every rank.
class DenseAdamWDataParallel final : public DataParallelOptimizer {
 public:
  DenseAdamWDataParallel(RankGroup* group, AdamWConfig config, DecayMask decay_mask,
                         double grad_clip = 0);
  std::string name() const override { return OptimizerName(OptimizerKind::kAdamW); }
  absl::Status Step(float* params, float* grads, int64_t size, double lr) override;
  absl::StatusOr<std::string> SaveState() override;
  absl::Status RestoreState(absl::string_view state) override;
  int64_t step_count() const override { return adamw_.step_count(); }
  const std::vector<float>& first_moment() const override;

 private:
  RankGroup* group_;
  AdamW adamw_;
  double grad_clip_;
};

// Dense AdamS: all-reduce the gradient (N floats), then AdamS on every rank.
class DenseAdamSDataParallel final : public DataParallelOptimizer {
 public:
  DenseAdamSDataParallel(RankGroup* group, AdamSConfig config, DecayMask decay_mask);
  std::string name() const override { return OptimizerName(OptimizerKind::kAdamS); }
  absl::Status Step(float* params, float* grads, int64_t size, double lr) override;
  absl::StatusOr<std::string> SaveState() override;
  absl::Status RestoreState(absl::string_view state) override;
  int64_t step_count() const override { return adams_.step_count(); }
  const std::vector<float>& first_moment() const override { return adams_.first_moment(); }

 private:
  RankGroup* group_;
  AdamS adams_;
};

// topk-adamw's exchange, one decision for every form that runs it: each
// rank sends its picks (as many on every rank) as (uint32 index, float
// value) pairs through one all-gather-v, and every rank gets the sum over
// ranks at the union of the picks, indices ascending, each sum taken in rank
// order from 0.0f, so the host and device forms produce the same bits.
// `indices` must be ascending and < size (INVALID_ARGUMENT); a peer's that
// are not are DATA_LOSS naming the rank; a size past uint32 is
// INVALID_ARGUMENT.
struct SparseSum {
  std::vector<int64_t> indices;
  std::vector<float> values;
};
absl::StatusOr<SparseSum> AllGatherSparseSum(RankGroup& group, absl::Span<const int64_t> indices,
                                             absl::Span<const float> values, int64_t size,
                                             absl::string_view who);

// Top-k of raw gradients with error feedback feeding AdamW (the DGC/Ok-Topk
// family SCAPE replaces): each rank adds its gradient to its residual, sends
// the ceil(density·N) largest |residual| entries of the WHOLE buffer as
// (uint32 index, float value) pairs through an all-gather-v, zeroes what it
// sent, and every rank runs AdamW on the sum of what everyone sent. The
// union of the ranks' picks grows with P (fill-in). Steps before
// `dense_warmup_steps` and steps where `schedule` puts the density at 1
// all-reduce the whole residual instead.
class TopKGradientAdamW final : public DataParallelOptimizer {
 public:
  TopKGradientAdamW(RankGroup* group, AdamWConfig config, DecayMask decay_mask, double density,
                    DensitySchedule schedule = {}, int64_t dense_warmup_steps = 0);
  std::string name() const override { return OptimizerName(OptimizerKind::kTopKAdamW); }
  absl::Status Step(float* params, float* grads, int64_t size, double lr) override;
  absl::StatusOr<std::string> SaveState() override;
  absl::Status RestoreState(absl::string_view state) override;
  int64_t step_count() const override { return adamw_.step_count(); }
  const std::vector<float>& first_moment() const override;
  int64_t last_union_size() const { return last_union_size_; }

 private:
  RankGroup* group_;
  AdamW adamw_;
  double density_;
  DensitySchedule schedule_;
  int64_t dense_warmup_steps_;
  std::vector<float> residual_, summed_, magnitude_;
  int64_t last_union_size_ = 0;
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_DATA_PARALLEL_OPTIMIZER_H_
