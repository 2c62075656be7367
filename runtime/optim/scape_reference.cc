#include "runtime/optim/scape_reference.h"

#include "runtime/optim/adamw.h"
#include "runtime/optim/mask_walk.h"
#include "runtime/optim/optim_scalars.h"

namespace corescape::optim {

ReferenceRule::Scalars ReferenceRule::ScalarsAt(int64_t step, double lr) const {
  return ScapeReferenceScalarsAt(adams_, step + 1, lr, world_size_);
}

void ReferenceRule::Payload(absl::Span<float> residual, const float* m, const float* grads,
                            const Scalars& s, ThreadPool* pool) {
  float* e = residual.data();
  ParallelForOn(
      pool, static_cast<int64_t>(residual.size()),
      [&](int64_t from, int64_t to) {
        for (int64_t j = from; j < to; ++j) kernels::host_device::ScapePayloadElement(e[j], m[j], grads[j], s);
      },
      kUpdateChunk);
}

double ReferenceRule::Apply(float* params, absl::Span<float> m, absl::Span<float> values,
                            const std::vector<int64_t>& mask, bool dense, const uint8_t* decays,
                            const Scalars& s, double grad_clip, ThreadPool* pool) {
  const int64_t synced = static_cast<int64_t>(values.size());
  // b = mean_r c^r; ĝ = (b − β1·m_prev)/(1−β1), in place (0 off the mask,
  // so the packed values' norm is ĝ's global norm).
  ParallelForOn(
      pool, synced,
      [&](int64_t from, int64_t to) {
        for (int64_t p = from; p < to; ++p) {
          kernels::host_device::ScapeReconstructElement(values[p], m[dense ? p : mask[p]], s);
        }
      },
      kUpdateChunk);
  // ĝ is identical on every rank, so is its clipping (its norm summed in
  // one order, on this thread).
  const double norm = ClipGradientNorm(values.data(), synced, grad_clip);
  WalkMaskOn(
      pool, static_cast<int64_t>(m.size()), mask, dense,
      [&](int64_t j, int64_t p) {
        kernels::host_device::ScapeReferenceOnMask(params[j], m[j], values[p], decays[j] != 0, s);
      },
      [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          kernels::host_device::ScapeReferenceOffMask(params[j], m[j], decays[j] != 0, s);
        }
      });
  return norm;
}

}  // namespace corescape::optim
