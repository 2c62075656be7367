#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_STATE_STORE_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_STATE_STORE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/kernels/cuda/topk.h"
#include "runtime/optim/mask_statistic.h"
#include "runtime/optim/optim_scalars.h"
#include "runtime/optim/rank_group.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::optim {

// Where SCAPE keeps the first moment m, this rank's residual e (and the
// catch-up rule's v̄), the ages (the step each coordinate was last
// synchronized at), and what runs their per-coordinate work. The default
// is ScapeOptimizer's own host vectors and loops; a model backend's memory
// (runtime/train: DeviceScapeStore) keeps them beside the parameters, and
// Step then takes that backend's parameter and gradient buffers. Masks stay
// on the host (selection's bookkeeping, coding, exchange) unless the store
// holds them, and so does the checkpoint format. Both rules'
// per-coordinate work runs in the store: the host store
// (scape_host_store.h) runs their host forms (scape_catch_up.h,
// scape_reference.h), a device store the same bodies as launches.
class ScapeStateStore {
 public:
  virtual ~ScapeStateStore() = default;
  // The reference rule: e ← c = β1·m + (1−β1)·P·g + e over every
  // coordinate, then statistic ← |e| over [begin, end) (host; what the next
  // mask is chosen from).
  virtual absl::Status Payload(const float* grads,
                               const kernels::host_device::ScapeReferenceScalars& scalars, int64_t begin,
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
  using TopKSegment = kernels::host_device::TopKSegment;
  // Each segment's top k by `statistic` (optim::SelectTopK's set: ties to
  // the lower coordinate), ascending, the segments' one after another
  // (host).
  virtual absl::StatusOr<std::vector<int64_t>> SelectByStatistic(
      absl::Span<const TopKSegment> segments, MaskStatistic statistic,
      const kernels::host_device::MaskStatisticScalars& scalars) {
    return absl::UnimplementedError("this SCAPE state store ranks nothing (selects() is false)");
  }
  // The mask exchange's thread hands over the mask for step mask.step,
  // beside the next forward/backward, while the caller goes on using the
  // store: ages kept on the host are written here (the last update's, owed
  // since) and the catch-up rule's windows worked out from them, and the
  // mask is staged where the store uploads it from, so that the Pack with
  // MaskSource::kReceived and the update after it do that work no more.
  // It touches only the ages and that staging.
  virtual absl::Status MaskReceived(const GlobalMask& mask) = 0;
  // Whether the store can keep a selection in its own memory as a later
  // step's mask (HoldSelection): what a group of one does, whose selection
  // is the whole mask, so that its indices need never reach the host.
  virtual bool holds_masks() const { return false; }
  // SelectByStatistic's selection (the segments' k clamped likewise), kept
  // in the store for a Pack with MaskSource::kHeld; masks are packed in the
  // order they were held, at most two waiting. Returns its entry count.
  virtual absl::StatusOr<int64_t> HoldSelection(absl::Span<const TopKSegment> segments,
                                                MaskStatistic statistic,
                                                const kernels::host_device::MaskStatisticScalars& scalars) {
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
    kHost,      // `mask`
    kReceived,  // `mask`, the last one MaskReceived was handed
    kHeld,      // the oldest selection HoldSelection kept; `mask` is empty
  };
  // Packs e at the mask (ascending; `dense`: every coordinate) into the
  // values buffer in mask order and zeroes e there. Returns the buffer,
  // ready for the all-reduce. `mask` stays as it is until the next Pack
  // (the update's ages may be written from it a step late).
  virtual absl::StatusOr<float*> Pack(const std::vector<int64_t>& mask, bool dense,
                                      MaskSource source) = 0;
  // The reference rule at step `step` (from 0), from the summed values at
  // the mask of the last Pack: ĝ, clipped to a global norm of grad_clip
  // (<= 0: not clipped), then bias-corrected AdamS on the mask, m ← 0 and
  // decay off it; the mask's ages set to `step` (on the host: owed, see
  // MaskReceived). Returns ‖ĝ‖ before clipping.
  virtual absl::StatusOr<double> Apply(float* params, int64_t step,
                                       const kernels::host_device::ScapeReferenceScalars& scalars,
                                       double grad_clip) = 0;
  // The catch-up rule: e ← e + (1−β1)·g.
  virtual absl::Status Accumulate(const float* grads,
                                  const kernels::host_device::ScapeCatchUpScalars& scalars) = 0;
  // The catch-up update at step `step` from the summed values at the last
  // Pack's mask: θ decays everywhere, then each of the mask's coordinates
  // catches up over its window (steps since its age), and the mask's ages
  // are set to `step` (on the host: owed, see MaskReceived). `powers` are
  // host tables.
  virtual absl::Status CatchUpApply(float* params, int64_t step,
                                    const kernels::host_device::ScapeCatchUpScalars& scalars,
                                    const CatchUpPowerTables& powers) = 0;
  // Sums `count` floats of one of the store's buffers (Pack's values,
  // Residual()) over the group's ranks, in place, in the memory the store
  // keeps them in.
  virtual absl::Status SumOverRanks(RankGroup& group, float* data, int64_t count) = 0;
  // The residual, ready for SumOverRanks; then e ← e·scale.
  virtual absl::StatusOr<float*> Residual() = 0;
  virtual absl::Status ScaleResidual(float scale) = 0;
  // Writes the ages the last update owes now: no exchange's thread follows
  // to write them (nothing to do where they are set beside the update).
  virtual void SettleAges() = 0;
  // Host copies of m, e and v̄ (the host store: they are already; a store
  // that keeps no v̄ leaves it), and of the ages (each coordinate's last
  // synchronized step, −1: never; the owed ones written first, so no
  // exchange may be in flight); and replacing the store's from them.
  virtual absl::Status Read(std::vector<float>& m, std::vector<float>& e,
                            std::vector<float>& vbar) = 0;
  virtual absl::Status ReadAges(std::vector<int64_t>& last_sync) = 0;
  virtual absl::Status Write(const std::vector<float>& m, const std::vector<float>& e,
                             const std::vector<float>& vbar,
                             const std::vector<int64_t>& last_sync) = 0;
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_STATE_STORE_H_
