#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_UPDATES_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_UPDATES_H_

// Per-coordinate bodies of the optimizers in runtime/optim (AdamW, AdamS,
// SCAPE's reference rule and its error-feedback payload), in the same float
// operations and the same order, so a launch built from them (with
// --fmad=false) gives the CPU optimizer's bits. runtime/optim keeps its own
// loops; these mirror them, and optim_updates_test holds the two together.
// The per-step scalars come from optim_scalars.h (host, in double, as there).
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

// ---- AdamW (runtime/optim/adamw.cc, AdamW::Step) ----
struct AdamWScalars {
  float beta1, beta2, eps;
  float step_size;       // η / (1 − β1^t)
  float decay;           // 1 − ηλ
  float inv_bias2_sqrt;  // 1 / √(1 − β2^t)
};

CORESCAPE_HOST_DEVICE void AdamWElement(float& theta, float& m, float& v, float g, bool decays,
                                        const AdamWScalars& s) {
  if (decays) theta *= s.decay;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  const float denominator = sqrtf(v) * s.inv_bias2_sqrt + s.eps;
  theta -= s.step_size * m / denominator;
}

// ---- AdamS (runtime/optim/adams.h, AdamSUpdate) ----
struct AdamSScalars {
  float beta1, beta2, eps, lr;
  float decay;  // 1 − ηλ, for decaying entries
};

// v = β2·m_prev² + (1−β2)·g²; m ← β1·m + (1−β1)·g; θ ← θ·decay − η·m/(√v+ε).
CORESCAPE_HOST_DEVICE void AdamSElement(float& theta, float& m, float g, bool decays,
                                        const AdamSScalars& s) {
  const float v = s.beta2 * m * m + (1.0f - s.beta2) * g * g;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  theta *= decays ? s.decay : 1.0f;
  theta -= s.lr * m / (sqrtf(v) + s.eps);
}

// ---- SCAPE, reference rule (runtime/optim/scape_optimizer.cc) ----
struct ScapeReferenceScalars {
  float beta1, beta2, eps, lr;
  float decay;              // 1 − ηλ
  float payload_one_minus_beta1;  // (float)(1 − β1), computed in double as Step does
  float world;              // P
  float inverse_ranks;      // 1/P
  float correction1;        // 1 − β1^t
  float sqrt_correction2;   // √(1 − β2^t)
};

// The error-feedback residual update: e^r ← c^r = β1·m + (1−β1)·(P·g^r) + e^r,
// with g^r this rank's 1/P share of the mean gradient. The result is both
// the payload and the mask statistic (|c^r|).
CORESCAPE_HOST_DEVICE void ScapePayloadElement(float& residual, float m, float g,
                                               const ScapeReferenceScalars& s) {
  residual = s.beta1 * m + s.payload_one_minus_beta1 * (s.world * g) + residual;
}

// Mask-order packing: values[p] = e[mask[p]], and what is sent leaves the
// residual.
CORESCAPE_HOST_DEVICE void PackAtMaskElement(int64_t p, const int64_t* mask, float* residual,
                                             float* values) {
  values[p] = residual[mask[p]];
  residual[mask[p]] = 0.0f;
}

// Scatters a synchronized value back to its coordinate (the inverse of the
// packing, for buffers the step keeps dense).
CORESCAPE_HOST_DEVICE void UnpackAtMaskElement(int64_t p, const int64_t* mask, const float* values,
                                               float* dense) {
  dense[mask[p]] = values[p];
}

// ĝ = (b − β1·m_prev)/(1−β1), b = (Σ_r c^r)/P: the gradient reconstructed
// from the one synchronized buffer, in place of the summed value.
CORESCAPE_HOST_DEVICE void ScapeReconstructElement(float& value, float m_prev,
                                                   const ScapeReferenceScalars& s) {
  const float b = value * s.inverse_ranks;
  value = (b - s.beta1 * m_prev) / (1.0f - s.beta1);
}

// Bias-corrected AdamS at a masked coordinate from its (clipped) ĝ.
CORESCAPE_HOST_DEVICE void ScapeReferenceOnMask(float& theta, float& m, float g_hat, bool decays,
                                                const ScapeReferenceScalars& s) {
  const float d = decays ? s.decay : 1.0f;
  const float v = s.beta2 * m * m + (1.0f - s.beta2) * g_hat * g_hat;  // m is still m_prev
  m = s.beta1 * m + (1.0f - s.beta1) * g_hat;
  theta *= d;
  theta -= s.lr * (m / s.correction1) / (sqrtf(v) / s.sqrt_correction2 + s.eps);
}

// Off the mask the first moment lives only in the residual; θ only decays.
CORESCAPE_HOST_DEVICE void ScapeReferenceOffMask(float& theta, float& m, bool decays,
                                                 const ScapeReferenceScalars& s) {
  m = 0.0f;
  theta *= decays ? s.decay : 1.0f;
}

// The factor ClipGradientNorm (runtime/optim/adamw.cc) scales by, given the
// norm: 1 when no clipping applies.
CORESCAPE_HOST_DEVICE float ClipScale(double norm, double max_norm) {
  return max_norm > 0.0 && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.0f;
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_UPDATES_H_
