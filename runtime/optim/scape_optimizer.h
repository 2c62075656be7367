#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_OPTIMIZER_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/kernels/cuda/optim_scalars.h"
#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/kernels/cuda/topk.h"
#include "runtime/optim/adams.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/rank_group.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::optim {

// How a synchronized value becomes a step (docs/scape.md has the equations
// and the measurements behind the default).
enum class ScapeRule {
  // The plain reconstruction: AdamS on the masked coordinates with
  // ĝ = b/(1−β1); the off-mask rule decides the rest.
  kReconstructed,
  // "Lazy" catch-up: a coordinate last synchronized K steps ago
  // applies K steps of the window's mean gradient at once.
  kCatchUp,
  // Linearized AdamS: m ← a·m + b on every coordinate (b = 0 off the mask),
  // θ ← θ − η(m/D + λθ) everywhere, with D the AdamS normalizer of the
  // coordinate's last synchronization (smoothed), so an accumulated residual
  // turns into K steps' worth of movement and off-mask coordinates keep
  // moving on their decaying momentum. With K = 1 (dense) D = √v + ε: AdamS.
  kLinearized,
  // The authors' formulation (docs/scape.md, "The reference rule"): the
  // payload is the error-compensated LOCAL first moment
  // c^r = β1·m + (1−β1)·g^r_local + e^r, averaged at the mask; off the mask
  // m = 0 and e^r = c^r; ĝ = (b − β1·m_prev)/(1−β1), clipped to a global
  // norm; bias-corrected AdamS on the mask, decay only off it; per-tensor
  // masks chosen by |c^owner|. Residual and decay are applied once each.
  kReference,
};

// "reconstructed", "catch-up", "linearized", "reference": the rules' names in
// flags and job specs.
const char* ScapeRuleName(ScapeRule rule);
absl::StatusOr<ScapeRule> ParseScapeRule(absl::string_view name);

// Off-mask rule for kReconstructed.
enum class OffMaskRule { kDecayOnly, kFrozen, kMomentumKeepsMoving };

// The first-moment statistic rank r ranks its range by (defined beside its
// per-coordinate body, which the host and the device both run).
using MaskStatistic = kernels::cuda::MaskStatistic;

// `statistic` of each of n coordinates into out (the per-coordinate body
// the device runs too): m is read unless the statistic is kResidual or
// kNormalizedResidual, vbar only by kNormalizedResidual (either may be null
// where it is not read). With a pool, in chunks on its threads (the same
// values).
void FillMaskStatistic(MaskStatistic statistic, const float* m, const float* e, const float* vbar,
                       int64_t n, const kernels::cuda::MaskStatisticScalars& scalars, float* out,
                       ThreadPool* pool = nullptr);
// The same at the given coordinates: out[i] is coordinates[i]'s.
void FillMaskStatisticAt(MaskStatistic statistic, const float* m, const float* e,
                         const float* vbar, absl::Span<const int64_t> coordinates,
                         const kernels::cuda::MaskStatisticScalars& scalars, float* out,
                         ThreadPool* pool = nullptr);

// The statistics' names in job specs and flags ("momentum-plus-scaled-residual",
// "momentum-plus-residual", "residual", "momentum", "normalized-residual").
const char* MaskStatisticName(MaskStatistic statistic);
absl::StatusOr<MaskStatistic> ParseMaskStatistic(absl::string_view name);

// How kLinearized refreshes the normalizer of a coordinate synchronized
// after K > 1 steps (K = 1 always uses AdamS's own v).
enum class NormalizerRefresh {
  kFrozen,    // keep v̄ as it was
  kSmoothed,  // v̄ ← ρ^K·v̄ + (1−ρ^K)·v_window
  kWindow,    // v̄ ← v_window
  kMax,       // v̄ ← max(ρ^K·v̄, ĝ²): grows with the signal at once, never
              // inflates it by K, forgets slowly
};

// The sparse optimizers' default density: 10% of the entries per step (the
// quality/bytes point docs/scape.md recommends).
inline constexpr double kDefaultDensity = 0.1;

struct ScapeConfig {
  AdamSConfig adams;
  double density = kDefaultDensity;  // d = 1 − sparsity; 1.0 is dense AdamS
  int64_t dense_warmup_steps = 0;   // steps before the first mask (at least 1)
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
  OffMaskRule off_mask = OffMaskRule::kDecayOnly;
  MaskStatistic statistic = MaskStatistic::kMomentumPlusScaledResidual;
  // Share of each rank's k given to the coordinates of its range synchronized
  // least recently (starvation guard); the rest go by the statistic.
  double exploration = 0.0;
  // kLinearized: off the mask the momentum is forecast to continue as if the
  // gradient were forecast·m (0: decays with β1; 1: stays); residuals carry
  // the forecast's error.
  double forecast = 0.0;
  double normalizer_beta = 0.95;    // ρ of the smoothed normalizer v̄
  // kCatchUp: a value covering K steps moves K^catch_up_exponent steps
  // (1: full catch-up; 0.5: damped to the random-walk length).
  double catch_up_exponent = 0.65;
  // If ≥ 0: the exponent of a coordinate whose window mean ĝ agrees with its
  // previous m (agreement = max(0, ĝ·m)/max(ĝ², m²) ∈ [0, 1]); the exponent
  // moves linearly from catch_up_exponent (agreement 0) to this (1).
  double catch_up_exponent_consistent = -1.0;
  // kCatchUp: residuals decay with β1 (e ← β1·e + (1−β1)·g), so the summed
  // residual is exactly the ranks' share of the first moment built since the
  // coordinate was last sent, and m ← β1^K·m + b is the dense first moment.
  // false: plain error-compensated increments, m ← β1^K·m + (1−β1^K)·ĝ.
  bool decayed_residual = false;
  // kLinearized: residuals accumulate η_t·(1−β1)·g (what the step would have
  // moved), converted back at the current η when sent, so an increment
  // delayed into a lower learning rate still moves as far as it would have.
  // At K = 1 this is the plain rule up to rounding.
  bool lr_weighted = false;
  NormalizerRefresh refresh = NormalizerRefresh::kSmoothed;
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
  // kReference with its state on a device backend (runtime/train's
  // DeviceScapeStore): this rank's residual in pinned host memory, streamed
  // through two staging chunks each step, instead of in device memory. Where
  // the state lives, not what it is: the bits are the same, so it is not part
  // of ToString() and a checkpoint restores either way.
  bool offload_residuals = false;
  // Where the mask exchange encodes this rank's part and issues its
  // collectives: kOnThread (off the step's path) needs the group to carry
  // nothing else between the optimizer's steps; the trainer picks it when its
  // token counts and losses go over another group. How, not what: not part
  // of ToString().
  MaskSending mask_sending = MaskSending::kOnCaller;

  absl::Status Validate() const;
  std::string ToString() const;     // every field; stored in checkpoints
  bool PerTensor() const { return per_tensor_masks || rule == ScapeRule::kReference; }
};

// The partition map SCAPE uses for `config` over a buffer whose tensors are
// `tensor_bounds` (T + 1 offsets): whole tensors per rank with per-tensor
// masks, else the element-balanced cut. The scheduler's mask epochs and the
// optimizer (when no map is given) both take it from here.
absl::StatusOr<ParameterPartition> ScapePartition(const ScapeConfig& config,
                                                  const std::vector<int64_t>& tensor_bounds,
                                                  int world_size);

// Where SCAPE keeps the first moment m, this rank's residual e (and the
// catch-up rule's v̄), and what runs their per-coordinate work. The default
// is ScapeOptimizer's own host vectors and loops; a model backend's memory
// (runtime/train: DeviceScapeStore) keeps them beside the parameters, and
// Step then takes that backend's parameter and gradient buffers. Masks and
// ages stay on the host either way (selection's bookkeeping, coding,
// exchange), and so does the checkpoint format. Every rule packs its values
// through the store; the reference rule's payload and update always run in
// it, the catch-up rule's where runs_catch_up().
class ScapeStateStore {
 public:
  virtual ~ScapeStateStore() = default;
  // Whether the store's buffers (and so Step's params and grads) are host
  // memory.
  virtual bool host_addressable() const = 0;
  // The reference rule: e ← c = β1·m + (1−β1)·P·g + e over every
  // coordinate, then statistic ← |e| over [begin, end) (host; what the next
  // mask is chosen from).
  virtual absl::Status Payload(const float* grads,
                               const kernels::cuda::ScapeReferenceScalars& scalars, int64_t begin,
                               int64_t end, std::vector<float>& statistic) = 0;
  // Whether the store ranks its state where it keeps it (SelectByStatistic).
  // The reference rule's Payload then leaves `statistic` empty and the
  // optimizer chooses the next mask right after it, before Pack zeroes e at
  // the current one; the catch-up rule's after the update.
  virtual bool selects() const { return false; }
  // Threads for the host loops the store runs (ScapeOptimizer::UseThreadPool).
  virtual void UseThreadPool(ThreadPool* pool) {}
  // One tensor of a selection: the k coordinates of [offset, offset + numel)
  // with the largest statistic.
  using TopKSegment = kernels::cuda::TopKSegment;
  // Each segment's top k by `statistic` (optim::SelectTopK's set: ties to
  // the lower coordinate), ascending, the segments' one after another
  // (host).
  virtual absl::StatusOr<std::vector<int64_t>> SelectByStatistic(
      absl::Span<const TopKSegment> segments, MaskStatistic statistic,
      const kernels::cuda::MaskStatisticScalars& scalars) {
    return absl::UnimplementedError("this SCAPE state store ranks nothing (selects() is false)");
  }
  // Copies a received mask's indices (and the catch-up rule's windows; else
  // empty) into host memory the store uploads them from at the mask's step
  // (Pack with `staged`, and the CatchUpApply after it), so that step
  // copies nothing of its own. Called on the mask exchange's thread while
  // the caller goes on using the store: it touches only that staging.
  // Returns whether it staged them (the default stages nothing).
  virtual bool StageMask(absl::Span<const int64_t> indices, absl::Span<const int32_t> windows) {
    return false;
  }
  // Whether the store can keep a selection in its own memory as a later
  // step's mask (HoldSelection): what a group of one does, whose selection
  // is the whole mask, so that its indices need never reach the host.
  virtual bool holds_masks() const { return false; }
  // SelectByStatistic's selection (the segments' k clamped likewise), kept
  // in the store for a Pack with MaskSource::kHeld; masks are packed in the
  // order they were held, at most two waiting. Returns its entry count.
  virtual absl::StatusOr<int64_t> HoldSelection(absl::Span<const TopKSegment> segments,
                                                MaskStatistic statistic,
                                                const kernels::cuda::MaskStatisticScalars& scalars) {
    return absl::UnimplementedError("this SCAPE state store holds no masks");
  }
  // The indices, on the host, of the last Pack's mask (`held` false) or of
  // the oldest held one (`held` true): for checkpoints and accessors.
  virtual absl::StatusOr<std::vector<int64_t>> ReadMask(bool held) {
    return absl::UnimplementedError("this SCAPE state store holds no masks");
  }
  // Forgets every held mask (the optimizer replaced its pending mask).
  virtual void DropHeldMasks() {}
  // Where the indices of the mask a Pack applies are.
  enum class MaskSource {
    kHost,    // `mask`
    kStaged,  // `mask`, already copied where the store uploads it from (StageMask)
    kHeld,    // the oldest selection HoldSelection kept; `mask` is empty
  };
  // Packs e at the mask (ascending; `dense`: every coordinate) into the
  // values buffer in mask order and zeroes e there. Returns the buffer,
  // ready for the all-reduce.
  virtual absl::StatusOr<float*> Pack(const std::vector<int64_t>& mask, bool dense,
                                      MaskSource source) = 0;
  // Whether the store keeps the ages (the step each coordinate was last
  // synchronized) beside its state: Apply and CatchUpApply then set them
  // for the mask of step `step`, and CatchUpApply works out the windows
  // from them. Otherwise the optimizer keeps them on the host and hands
  // CatchUpApply the windows.
  virtual bool keeps_ages() const { return false; }
  // The reference rule at step `step` (from 0), from the summed values at
  // the mask of the last Pack: ĝ, clipped to a global norm of grad_clip
  // (<= 0: not clipped), then bias-corrected AdamS on the mask, m ← 0 and
  // decay off it. Returns ‖ĝ‖ before clipping.
  virtual absl::StatusOr<double> Apply(float* params, int64_t step,
                                       const kernels::cuda::ScapeReferenceScalars& scalars,
                                       double grad_clip) = 0;
  // Whether the catch-up rule's accumulation and update run in the store
  // (Accumulate, CatchUpApply).
  virtual bool runs_catch_up() const { return false; }
  // e ← e + (1−β1)·g (decayed residuals: β1·e + (1−β1)·g).
  virtual absl::Status Accumulate(const float* grads,
                                  const kernels::cuda::ScapeCatchUpScalars& scalars) {
    return absl::UnimplementedError("this SCAPE state store runs no catch-up rule");
  }
  // The catch-up update at step `step` from the summed values at the last
  // Pack's mask: θ decays everywhere, then the mask's p-th coordinate, last
  // synchronized windows[p] steps ago, catches up. `windows` are on the
  // host, empty where the store keeps the ages. `powers` are host tables.
  virtual absl::Status CatchUpApply(float* params, int64_t step, absl::Span<const int32_t> windows,
                                    const kernels::cuda::ScapeCatchUpScalars& scalars,
                                    const kernels::cuda::CatchUpPowerTables& powers) {
    return absl::UnimplementedError("this SCAPE state store runs no catch-up rule");
  }
  // The residual, ready for an all-reduce; then e ← e·scale.
  virtual absl::StatusOr<float*> Residual() = 0;
  virtual absl::Status ScaleResidual(float scale) = 0;
  // Host copies of m, e, v̄ and the ages (each coordinate's last
  // synchronized step, −1: never) — the host store: they are already; a
  // store that keeps no v̄, or no ages, leaves them — and replacing the
  // store's from them.
  virtual absl::Status Read(std::vector<float>& m, std::vector<float>& e, std::vector<float>& vbar,
                            std::vector<int64_t>& last_sync) = 0;
  virtual absl::Status Write(const std::vector<float>& m, const std::vector<float>& e,
                             const std::vector<float>& vbar,
                             const std::vector<int64_t>& last_sync) = 0;
};

// Whether the catch-up rule under `config` can run in a store
// (runs_catch_up()): not with age-based exploration or a per-coordinate
// exponent, which need the host's state.
absl::Status CheckCatchUpInStore(const ScapeConfig& config);

// Whether config.offload_residuals can hold: only where the state lives in
// a store that can keep the residual in pinned host memory (the reference
// rule, or the catch-up rule as CheckCatchUpInStore allows). The error says
// what it needs, for the caller to prefix with the field's name.
absl::Status CheckResidualOffload(const ScapeConfig& config);

// SCAPE (arXiv 2607.01678) as one rank runs it, over a RankGroup:
//  - the mask for step t+1 is selected at the end of step t from first-moment
//    statistics, each rank only inside its partition range (ceil(d·|range|)
//    entries), and exchanged by an asynchronous all-gather-v that overlaps
//    step t+1's forward/backward;
//  - at step t every rank adds its error-compensated increment to its
//    residual, packs the residual at the mask in mask order and zeroes it
//    there; ONE all-reduce of the packed vector synchronizes the values;
//  - m, θ (and v̄, ages) are updated from that buffer alone, so they stay
//    bitwise identical on every rank.
// Steps before dense_warmup_steps (and every step at density 1) synchronize
// every coordinate with the same code path.
class ScapeOptimizer final : public DataParallelOptimizer {
 public:
  // `tensor_bounds`: the T + 1 offsets of the buffer's tensors (empty: one
  // tensor, the whole buffer); per-tensor masks use them. `state_store`
  // (null: host memory) holds the reference rule's state, or the catch-up
  // rule's where it runs_catch_up(); other rules refuse one.
  static absl::StatusOr<std::unique_ptr<ScapeOptimizer>> Create(
      RankGroup* group, ScapeConfig config, DecayMask decay_mask,
      std::vector<int64_t> tensor_bounds = {},
      std::unique_ptr<ScapeStateStore> state_store = nullptr);
  ~ScapeOptimizer() override;

  // scape-global too: the same optimizer and state with whole-buffer masks.
  std::string name() const override { return OptimizerName(OptimizerKind::kScape); }
  absl::Status Step(float* params, float* grads, int64_t size, double lr) override;
  absl::StatusOr<std::string> SaveState() override;
  absl::Status RestoreState(absl::string_view state) override;
  int64_t step_count() const override { return step_; }
  // The selection's statistic and top-k on the host (and a store's that
  // ranks there) run on the pool's threads.
  void UseThreadPool(ThreadPool* pool) override;
  // With a device store, downloaded first (empty, logged, if that fails).
  const std::vector<float>& first_moment() const override {
    SyncHostCopies();
    return m_;
  }

  const ScapeConfig& config() const { return config_; }
  const ParameterPartition& partition() const { return partition_; }
  const std::vector<float>& residual() const {
    SyncHostCopies();
    return residual_;
  }
  const std::vector<float>& normalizer() const {
    SyncHostCopies();
    return vbar_;
  }
  // The step each coordinate was last synchronized at (−1: never). Finishes
  // an exchange in flight first (its thread sets the last step's ages).
  const std::vector<int64_t>& last_sync();
  // The mask applied at the last step (step = that step; no parts if dense).
  // A mask the store holds is read from it first (empty, logged, if that
  // fails).
  const GlobalMask& current_mask();
  // The mask for the next step once its exchange finished (SaveState
  // waits), or once chosen where the store holds it (read likewise).
  const std::optional<GlobalMask>& pending_mask();
  // Replaces the pending mask (tests). Step refuses it unless it is for the
  // next step and of our mask epoch.
  void SetPendingMask(GlobalMask mask);

  // Host memory the per-coordinate state takes here: the host store's
  // state, or a store's host copies (made only on demand: the accessors
  // above, checkpoints) and the ages where the store keeps none.
  int64_t host_state_bytes() const;

  // This rank's statistic over its scope after the last step: what the next
  // mask is selected from (the reference rule: empty where its store ranks
  // it itself, ScapeStateStore::selects()).
  std::vector<float> MaskStatisticValues() const;

 private:
  ScapeOptimizer(RankGroup* group, ScapeConfig config, DecayMask decay_mask,
                 std::vector<int64_t> tensor_bounds, ParameterPartition partition,
                 std::unique_ptr<ScapeStateStore> state_store);
  // Brings m_, residual_, vbar_ and (where the store keeps them) last_sync_
  // up to date from a store in another memory.
  absl::Status ReadStore() const;
  void SyncHostCopies() const;
  // A store's host copies (not the host store's state) freed: they are
  // made again when next read.
  void ReleaseHostCopies();
  // Coordinates in the buffer.
  int64_t BufferSize() const { return static_cast<int64_t>(decay_mask_.size()); }
  bool DenseAt(int64_t step) const;
  double DensityAt(int64_t step) const;
  absl::Status TakeMask(int64_t step);
  // The last update's ages are set a step late, on the mask exchange's
  // thread beside the next forward/backward (or at the end of the step when
  // no exchange follows): OweAges records them, PayOwedAges writes them.
  void OweAges(int64_t step, bool dense);
  void PayOwedAges();
  // Finishes an exchange in flight into pending_.
  absl::Status FinishExchange();
  // Starts the exchange of this rank's part of the mask for `step`.
  absl::Status StartExchange(int64_t step, std::vector<int64_t> own);
  // What the exchange's thread does with a received mask for this rule:
  // the owed ages, the catch-up windows and the store's staging (prepared_).
  MaskExchange::ReceivedHook ReceivedMaskHook();
  // The host update of the rules whose state lives here (kReconstructed,
  // kCatchUp, kLinearized), one function each over a run of coordinates,
  // on the pool's threads in chunks.
  struct HostUpdate;
  void Apply(float* params, int64_t size, double lr, bool dense);
  void ApplyReconstructed(float* params, int64_t from, int64_t to, const HostUpdate& u);
  void ApplyCatchUp(float* params, int64_t from, int64_t to, const HostUpdate& u);
  void ApplyLinearized(float* params, int64_t from, int64_t to, const HostUpdate& u);
  // θ_j ← θ_j·(1 − ηλ) for the decayed j of [begin, end): off the mask.
  void DecayRun(float* params, int64_t begin, int64_t end, float decay) const;
  // Coordinate j's factor: `decay` where it decays, else 1.
  float DecayFactor(int64_t j, float decay) const { return decay_mask_[j] ? decay : 1.0f; }
  // kCatchUp's update in the store (runs_catch_up()): the windows of the
  // mask's coordinates from their ages, then the store's update.
  absl::Status ApplyCatchUpInStore(float* params, double lr, bool dense);
  // kReference's update from the summed payload (the store's values).
  absl::Status ApplyReference(float* params, const kernels::cuda::ScapeReferenceScalars& scalars,
                              bool dense);
  // This rank's part of the mask for step `step`.
  absl::StatusOr<std::vector<int64_t>> SelectOwnPart(int64_t step);
  // Whether selections stay in the store as the next mask: a group of one
  // (its part is the whole mask) over a store that holds_masks().
  bool HoldsMasks() const { return group_->world_size() == 1 && state_store_->holds_masks(); }
  // HoldsMasks(): the mask for step `step` chosen and left in the store as
  // pending_ (its indices not read).
  absl::Status HoldOwnPart(int64_t step);
  // The current mask's entries, wherever its indices are.
  int64_t CurrentMaskEntries() const {
    return current_held_ >= 0 ? current_held_ : static_cast<int64_t>(current_.indices.size());
  }
  // The store's held masks' indices into current_ and pending_ where they
  // are not here yet.
  absl::Status ReadHeldMasks();
  // ReadHeldMasks for the accessors, which return what they have (the
  // failure logged).
  void ReadHeldMasksForAccessors();
  // What the store ranks by (the reference rule: |e| = |c^r|), and its
  // per-step scalars.
  MaskStatistic RankedStatistic() const;
  kernels::cuda::MaskStatisticScalars StatisticScalars() const;
  // The statistic of coordinates [from, to) into out[0, to − from), in
  // chunks on `pool` where one is given.
  void FillStatistic(int64_t from, int64_t to, float* out, ThreadPool* pool = nullptr) const;
  // This rank's statistic over its scope (kReference: its |c^r|).
  const std::vector<float>& StatisticOfRange();
  // Whether the mask for step + 1 can be selected while step's values
  // all-reduce and update run (on another thread): its inputs are final
  // before them, or change only at the current mask's entries.
  bool SelectsDuringUpdate(int64_t step, bool dense) const;
  // Before the update: the top k of this rank's range with the current
  // mask's entries left out. Reads the state off the mask only.
  std::vector<int64_t> SelectOffMaskCandidates(int64_t step);
  // After the update: the top k of the candidates and the current mask's
  // entries in this rank's range, which holds the true top k.
  std::vector<int64_t> SelectFromCandidates(int64_t step, const std::vector<int64_t>& candidates);
  // Per tensor of [begin, end): its top MaskCountForTensor, or all of it
  // (dense_small_tensors), from StatisticOfRange or by the store.
  absl::StatusOr<std::vector<int64_t>> SelectPerTensor(int64_t begin, int64_t end, double density);
  // The tensors of [begin, end) with their counts at `density` (k < 0: the
  // tensor whole).
  std::vector<ScapeStateStore::TopKSegment> TensorPlan(int64_t begin, int64_t end,
                                                       double density) const;

  RankGroup* group_;
  ThreadPool* pool_ = nullptr;  // UseThreadPool; null: this thread only
  ScapeConfig config_;
  DecayMask decay_mask_;
  std::vector<int64_t> tensor_bounds_;  // T + 1 offsets
  ParameterPartition partition_;
  MaskExchange exchange_;
  int64_t step_ = 0;
  // First moment (identical on every rank) and this rank's unsent
  // increments. Mutable: with a device store they are host copies, read on
  // demand by the const accessors.
  mutable std::vector<float> m_;
  mutable std::vector<float> vbar_;  // smoothed AdamS normalizer, identical on every rank
  mutable std::vector<float> residual_;
  // Step each coordinate was last synchronized (−1: never); a copy of the
  // store's where it keeps them (keeps_ages()).
  mutable std::vector<int64_t> last_sync_;
  std::vector<double> lr_sum_;      // Σ η up to and including each step
  std::vector<float> values_;     // packed buffer of the all-reduce
  // Where m, e (and v̄) live and their per-coordinate work runs (never
  // null; the host store keeps them in the vectors above).
  std::unique_ptr<ScapeStateStore> state_store_;
  // Whether state_store_ is the host store over m_, residual_ and vbar_
  // (else those are copies, sized only once read).
  bool host_state_;
  // kReference: |c^r| over this rank's range at the last step, what the next
  // mask is chosen from.
  std::vector<float> reference_statistic_;
  std::vector<float> statistic_;  // the statistic over this rank's range, reused
  double last_grad_norm_ = 0;  // kReference: ‖ĝ‖ of the last step, before clipping
  // kCatchUp in a store: the windows of the last mask, and the power tables.
  std::vector<int32_t> windows_;
  // Ages owed by the last update: last_sync_[j] = owed_ages_step_ at
  // current_'s entries (every j when owed_ages_dense_); −1: none.
  int64_t owed_ages_step_ = -1;
  bool owed_ages_dense_ = false;
  // An exchange that failed where no caller could be told (last_sync()):
  // the next Step or SaveState returns it.
  absl::Status exchange_error_;
  // What the exchange's thread prepared for the received mask of step
  // `step` (−1: nothing): the catch-up rule's windows (empty for other
  // rules) and whether the store staged the mask with them (StageMask).
  struct PreparedMask {
    int64_t step = -1;
    std::vector<int32_t> windows;
    bool staged = false;
  };
  PreparedMask prepared_;
  // The group's byte counters where the step's traffic starts (Step).
  struct Traffic {
    int64_t sent = 0;
    int64_t received = 0;
  };
  std::optional<Traffic> traffic_mark_;
  std::optional<kernels::cuda::CatchUpPowerTables> catch_up_powers_;
  GlobalMask current_;
  // A step forced dense because the restored pending mask was cut for another
  // partition map (−1: none).
  int64_t dense_after_restore_ = -1;
  bool ResidualSyncAfter(int64_t step) const;
  std::optional<GlobalMask> pending_;
  // Entries of current_ and pending_ where the store holds their indices
  // (HoldsMasks(); Pack takes them from there; their indices here may be
  // empty until read), −1 where it does not.
  int64_t current_held_ = -1;
  int64_t pending_held_ = -1;
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_OPTIMIZER_H_
