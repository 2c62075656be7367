#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_OPTIMIZER_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/mask_statistic.h"
#include "runtime/optim/rank_group.h"
#include "runtime/optim/scape_catch_up.h"
#include "runtime/optim/scape_config.h"
#include "runtime/optim/scape_mask_selector.h"
#include "runtime/optim/scape_reference.h"
#include "runtime/optim/scape_state_store.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::optim {

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
// Steps ScapeConfig::DenseAt calls dense synchronize every coordinate with
// the same code path. What a value does to m and θ is the rule's
// (scape_catch_up.h, scape_reference.h), and the state and ages it reads
// are the store's (ScapeStateStore); this class holds what both share: the
// step's phases, mask selection (ScapeMaskSelector), the exchange, timing
// and checkpoints.
class ScapeOptimizer final : public DataParallelOptimizer {
 public:
  // `tensor_bounds`: the T + 1 offsets of the buffer's tensors (empty: one
  // tensor, the whole buffer); per-tensor masks use them. `state_store`
  // (null: host memory, HostScapeStore) holds the rule's state.
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
  // state, or another store's host copies (made only on demand: the
  // accessors above, checkpoints).
  int64_t host_state_bytes() const;

  // This rank's statistic over its scope after the last step: what the next
  // mask is selected from (the reference rule: empty where its store ranks
  // it itself, ScapeStateStore::selects()).
  std::vector<float> MaskStatisticValues() const;

 private:
  // One Step's own state, passed through its phases: the phases' clock,
  // this rank's encoded part of the exchange it accounts for, and the next
  // mask where chosen during the step (scape_optimizer.cc).
  struct StepState;

  ScapeOptimizer(RankGroup* group, ScapeConfig config, DecayMask decay_mask,
                 std::vector<int64_t> tensor_bounds, ParameterPartition partition,
                 std::unique_ptr<ScapeStateStore> state_store);

  // The group's byte counters where a step's traffic starts.
  struct Traffic {
    int64_t sent = 0;
    int64_t received = 0;
  };

  // Step's phases, in order.
  // The mask this step applies: none when dense. False where there is none
  // yet: the reference rule's first mask, chosen from this step's payload.
  absl::StatusOr<bool> TakeStepMask(StepState& step);
  // Error-compensated increments into the residual (the rule's), and the
  // reference rule's first and next masks where chosen from them.
  absl::Status AddIncrements(StepState& step, bool first_mask_now, const float* grads);
  // Packs the residual at the mask (mask order) and all-reduces the values,
  // the next mask's selection beside it where it can (SelectsDuringUpdate),
  // then the rule's update.
  absl::Status SynchronizeAndUpdate(StepState& step, float* params);
  // residual_sync_period: every rank takes the ranks' mean residual.
  absl::Status SyncResiduals(StepState& step);
  // Chooses this rank's part of the next step's mask and starts its
  // exchange (or holds it in the store).
  absl::Status StartNextMask(StepState& step);
  // last_step_: what the step synchronized, sent and spent.
  void RecordStep(const StepState& step, const Traffic& traffic_end);

  // Brings m_, residual_ and vbar_ up to date from a store in another
  // memory.
  absl::Status ReadStore() const;
  void SyncHostCopies() const;
  // A store's host copies (not the host store's state) freed: they are
  // made again when next read.
  void ReleaseHostCopies();
  // Coordinates in the buffer.
  int64_t BufferSize() const { return static_cast<int64_t>(decay_mask_.size()); }
  bool DenseAt(int64_t step) const { return step == dense_after_restore_ || config_.DenseAt(step); }
  absl::Status TakeMask(int64_t step);
  // Finishes an exchange in flight into pending_.
  absl::Status FinishExchange();
  // Starts the exchange of this rank's part of the mask for `step`.
  absl::Status StartExchange(int64_t step, std::vector<int64_t> own);
  // What the exchange's thread does with a received mask: hands it to the
  // store (ScapeStateStore::MaskReceived).
  MaskExchange::ReceivedHook ReceivedMaskHook();
  // The reference rule's update from the summed payload.
  absl::Status ApplyReference(float* params, const ReferenceRule::Scalars& scalars);
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
  // Whether the mask for step + 1 can be selected while step's values
  // all-reduce and update run (on another thread): its inputs are final
  // before them, or change only at the current mask's entries.
  bool SelectsDuringUpdate(int64_t step, bool dense) const;

  RankGroup* group_;
  ThreadPool* pool_ = nullptr;  // UseThreadPool; null: this thread only
  ScapeConfig config_;
  DecayMask decay_mask_;
  std::vector<int64_t> tensor_bounds_;  // T + 1 offsets
  ParameterPartition partition_;
  MaskExchange exchange_;
  CatchUpRule catch_up_;
  ReferenceRule reference_;
  int64_t step_ = 0;
  // First moment (identical on every rank) and this rank's unsent
  // increments. Mutable: with a device store they are host copies, read on
  // demand by the const accessors.
  mutable std::vector<float> m_;
  // The catch-up rule's smoothed AdamS normalizer, identical on every rank.
  mutable std::vector<float> vbar_;
  mutable std::vector<float> residual_;
  // Step each coordinate was last synchronized (−1: never): the host
  // store's, or a copy of another store's (ReadAges).
  std::vector<int64_t> last_sync_;
  std::vector<float> values_;     // packed buffer of the all-reduce (the host store's)
  // Where m, e (and v̄) and the ages live and their per-coordinate work
  // runs (never null; the host store keeps them in the vectors above).
  std::unique_ptr<ScapeStateStore> state_store_;
  // Whether state_store_ is the host store over m_, residual_, vbar_ and
  // last_sync_ (else those are copies, sized only once read).
  bool host_state_;
  std::optional<ScapeMaskSelector> selector_;
  double last_grad_norm_ = 0;  // kReference: ‖ĝ‖ of the last step, before clipping
  // An exchange that failed where no caller could be told (last_sync()):
  // the next Step or SaveState returns it.
  absl::Status exchange_error_;
  // The step of the mask the exchange's thread handed to the store
  // (MaskReceived; −1: none since the last exchange started).
  int64_t received_step_ = -1;
  std::optional<Traffic> traffic_mark_;  // where the next step's traffic starts
  GlobalMask current_;
  // A step forced dense because the restored pending mask was cut for another
  // partition map (−1: none).
  int64_t dense_after_restore_ = -1;
  std::optional<GlobalMask> pending_;
  // Entries of current_ and pending_ where the store holds their indices
  // (HoldsMasks(); Pack takes them from there; their indices here may be
  // empty until read), −1 where it does not.
  int64_t current_held_ = -1;
  int64_t pending_held_ = -1;
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_OPTIMIZER_H_
