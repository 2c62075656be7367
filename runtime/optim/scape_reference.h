#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_REFERENCE_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_REFERENCE_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/optim/scape_config.h"

namespace corescape::optim {

// The SCAPE authors' formulation (ScapeRule::kReference; docs/scape.md, "The
// reference rule"). Rank r's payload is its error-compensated LOCAL first
// moment c^r = β1·m + (1−β1)·g^r_local + e^r, kept in e^r until the pack;
// the next mask is chosen by |c^r| (per tensor, by the tensor's owner). At
// the mask: b = mean_r c^r (the one all-reduce), e^r ← 0,
//   ĝ = (b − β1·m_prev)/(1−β1), clipped to a global norm,
//   v = β2·m_prev² + (1−β2)·ĝ²,  m ← β1·m_prev + (1−β1)·ĝ,
//   θ ← θ·(1−ηλ) − η·(m/(1−β1^t)) / (√v/√(1−β2^t) + ε);
// off it m ← 0 (the first moment lives in the residuals) and θ only decays.
//
// Host form: Payload and Apply below. Device form: ModelOps::ScapePayload,
// ScapeReconstruct and ScapeReferenceApply (runtime/model), launches of the
// same per-coordinate bodies (kernels/cuda/optim_updates.h), bit for bit.
class ReferenceRule {
 public:
  using Scalars = kernels::host_device::ScapeReferenceScalars;

  ReferenceRule(const ScapeConfig& config, int world_size)
      : adams_(config.adams), world_size_(world_size) {}

  // The scalars of step `step` (from 0; the bias corrections count from 1)
  // at learning rate `lr`.
  Scalars ScalarsAt(int64_t step, double lr) const;

  // Host form: e ← c = β1·m + (1−β1)·P·g + e over every coordinate (our
  // g^r sums to the mean gradient over ranks, so P·g^r is rank r's local
  // gradient).
  static void Payload(absl::Span<float> residual, const float* m, const float* grads,
                      const Scalars& s, ThreadPool* pool);
  // Host form of the update from the summed payload at `mask` (ascending;
  // `dense`: every coordinate), in `values` (the reconstructed ĝ after, 0
  // nowhere: only the mask's). ĝ is clipped to a global norm of grad_clip
  // (<= 0: not). Returns ‖ĝ‖ before clipping.
  static double Apply(float* params, absl::Span<float> m, absl::Span<float> values,
                      const std::vector<int64_t>& mask, bool dense, const uint8_t* decays,
                      const Scalars& s, double grad_clip, ThreadPool* pool);

 private:
  AdamConfig adams_;
  int world_size_;
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_REFERENCE_H_
