#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_CONFIG_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/optim/adam_config.h"
#include "runtime/optim/mask_statistic.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::optim {

// How a synchronized value becomes a step (docs/scape.md has the equations
// and the measurements behind the default; the variants that lost the
// formulation search are in docs/scape_search.md).
enum class ScapeRule {
  // Damped catch-up (runtime/optim/scape_catch_up.h): a coordinate last
  // synchronized K steps ago applies K^α steps of the window's mean
  // gradient at once.
  kCatchUp,
  // The SCAPE authors' formulation (runtime/optim/scape_reference.h): the
  // payload is the error-compensated LOCAL first moment, averaged at the
  // mask; AdamS on the mask from the reconstructed gradient, clipped.
  kReference,
};

// "catch-up", "reference": the rules' names in flags and job specs.
const char* ScapeRuleName(ScapeRule rule);
// A removed research rule ("reconstructed", "linearized") is refused with
// where it went.
absl::StatusOr<ScapeRule> ParseScapeRule(absl::string_view name);

// The sparse optimizers' default density: 10% of the entries per step (the
// quality/bytes point docs/scape.md recommends).
inline constexpr double kDefaultDensity = 0.1;

struct ScapeConfig {
  AdamSConfig adams;
  double density = kDefaultDensity;  // d = 1 − sparsity; 1.0 is dense AdamS
  // Steps before the first mask. The catch-up rule takes at least one (its
  // first mask is chosen from a step's state); the reference rule may start
  // sparse (its first mask is chosen synchronously from step 0's payload).
  int64_t dense_warmup_steps = 0;
  // After the warm-up, every dense_refresh_interval-th step synchronizes
  // everything (flushing all residuals); 0: never. The scheduler's forced
  // dense refresh steps, made periodic.
  int64_t dense_refresh_interval = 0;
  // The density at each step on the way to `density` (the paper's ramp, so
  // the fast-learning phase is not cut off at once). Steps at density 1 are
  // dense.
  DensitySchedule density_schedule;
  // Masks are chosen per parameter tensor: each rank owns whole tensors
  // (ParameterPartition::TensorAligned) and takes MaskCountForTensor of each
  // of its tensors by the statistic. Always on for kReference.
  bool per_tensor_masks = false;
  // With per-tensor masks: tensors that take no weight decay (norm gains,
  // biases) are sent whole every step.
  bool dense_small_tensors = false;
  // kReference: the global L2 norm ĝ is clipped to (the optimizer options'
  // grad_clip); <= 0: no clipping.
  double grad_clip = 0;
  MaskScope scope = MaskScope::kPartitioned;  // kWholeBuffer: per-rank global top-k baseline
  ScapeRule rule = ScapeRule::kCatchUp;
  // What kCatchUp ranks its range by (kReference ranks |c^r|).
  MaskStatistic statistic = MaskStatistic::kMomentumPlusScaledResidual;
  double normalizer_beta = 0.95;    // kCatchUp: ρ of the smoothed normalizer v̄
  // kCatchUp: a value covering K steps moves K^catch_up_exponent steps
  // (1: full catch-up; 0.5: damped to the random-walk length).
  double catch_up_exponent = 0.65;
  // The scheduler's mask epoch (MaskEpochCommand): masks carry it and a rank
  // refuses one of another epoch. It changes with membership, so it is not
  // part of ToString() and a checkpoint restores into a later epoch.
  uint64_t mask_epoch = 0;
  // The epoch's partition map: P + 1 bounds of the flat buffer, one range per
  // rank. Empty: the element-balanced cut (ParameterPartition::Balanced).
  std::vector<int64_t> partition_bounds;
  // After every step t with (t + 1) % residual_sync_period == 0 the ranks
  // replace their residuals by the ranks' mean (one all-reduce of N floats):
  // the updates, which depend on the mean only, do not change, and every
  // rank's state is then the same, so the checkpoint written after that step
  // (by rank 0) resumes any rank of any membership. 0: never.
  int64_t residual_sync_period = 0;
  // The epoch's forced dense refresh steps (e.g. its first step after a
  // membership change).
  std::vector<int64_t> forced_dense_steps;
  // With the state on a device backend (runtime/train's DeviceScapeStore):
  // this rank's residual in pinned host memory, streamed through two
  // staging chunks each step, instead of in device memory. Where the state
  // lives, not what it is: the bits are the same, so it is not part of
  // ToString() and a checkpoint restores either way.
  bool offload_residuals = false;
  // Where the mask exchange encodes this rank's part and issues its
  // collectives: kOnThread (off the step's path) needs the group to carry
  // nothing else between the optimizer's steps; the trainer picks it when its
  // token counts and losses go over another group. How, not what: not part
  // of ToString().
  MaskSending mask_sending = MaskSending::kOnCaller;

  absl::Status Validate() const;
  std::string ToString() const;     // every field that changes the bits; stored in checkpoints
  bool PerTensor() const { return per_tensor_masks || rule == ScapeRule::kReference; }
  // Steps before the first mask, as the rule takes them.
  int64_t WarmupSteps() const;
  // Whether step `step` synchronizes every coordinate: the warm-up, density
  // 1 (or the schedule's 1), a periodic or a forced refresh.
  bool DenseAt(int64_t step) const;
  double DensityAt(int64_t step) const { return density_schedule.At(step, density); }
  // Whether the ranks average their residuals after step `step`.
  bool ResidualSyncAfter(int64_t step) const {
    return residual_sync_period > 0 && (step + 1) % residual_sync_period == 0;
  }
};

// The partition map SCAPE uses for `config` over a buffer whose tensors are
// `tensor_bounds` (T + 1 offsets): whole tensors per rank with per-tensor
// masks, else the element-balanced cut. The scheduler's mask epochs and the
// optimizer (when no map is given) both take it from here.
absl::StatusOr<ParameterPartition> ScapePartition(const ScapeConfig& config,
                                                  const std::vector<int64_t>& tensor_bounds,
                                                  int world_size);

// The partition map of the optimizer over an n-entry buffer of tensors
// `tensor_bounds` (T + 1 offsets rising from 0 to n): the epoch's
// partition_bounds where given, else ScapePartition; whole tensors per rank
// with per-tensor masks.
absl::StatusOr<ParameterPartition> ScapePartitionOfBuffer(const ScapeConfig& config,
                                                          const std::vector<int64_t>& tensor_bounds,
                                                          int64_t n, int world_size);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_CONFIG_H_
