#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_UPDATES_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_UPDATES_H_

// Per-coordinate bodies of the optimizers in runtime/optim (AdamW, AdamS,
// SCAPE's reference and catch-up rules, the error-feedback residuals and the
// mask statistic), in the same float operations and the same order, so a
// launch built from them (with --fmad=false) gives the CPU optimizer's bits.
// runtime/optim runs them in its host loops (or mirrors them, and
// optim_updates_test holds the two together): host code as much as device
// code, so they live in kernels::host_device, not kernels::cuda.
// The per-step scalars come from runtime/optim/optim_scalars.h (host, in
// double, as there).
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::host_device {

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

// ---- SCAPE, reference rule (runtime/optim/scape_reference.cc) ----
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

// ---- SCAPE, catch-up rule (runtime/optim/scape_catch_up.cc) ----
struct ScapeCatchUpScalars {
  float beta1, beta2, eps, lr;
  float decay;                    // 1 − ηλ
  float rho;                      // the smoothed normalizer's ρ
  float residual_one_minus_beta1;  // (float)(1 − β1), computed in double as Step does
  bool first_step;                // t = 0: v̄ ← v
};

// A rank's unsent increment: e ← e + (1−β1)·g.
CORESCAPE_HOST_DEVICE void ScapeAccumulateElement(float& residual, float g,
                                                  const ScapeCatchUpScalars& s) {
  residual = residual + s.residual_one_minus_beta1 * g;
}

// β1^K and K^α of a window length K ≥ 1: table[K] where K < cached (the
// tables hold the double std::pow rounded to float), else computed. The
// tables are in the memory of whatever runs the body.
struct CatchUpPowers {
  const float* b1_to_k = nullptr;
  const float* k_to_alpha = nullptr;
  int64_t cached = 0;
  double beta1 = 0, exponent = 1;
};
CORESCAPE_HOST_DEVICE float CatchUpBeta1Power(int64_t k, const CatchUpPowers& p) {
  return k < p.cached ? p.b1_to_k[k] : static_cast<float>(pow(p.beta1, static_cast<double>(k)));
}
// K^α: the steps' worth of movement a value covering K steps makes.
CORESCAPE_HOST_DEVICE float CatchUpSteps(int64_t k, const CatchUpPowers& p) {
  return p.exponent == 1.0 ? static_cast<float>(k)
         : k < p.cached    ? p.k_to_alpha[k]
                           : static_cast<float>(pow(static_cast<double>(k), p.exponent));
}

// The window's mean gradient from a value b = (1−β1)·Σg covering K steps.
CORESCAPE_HOST_DEVICE float CatchUpMeanGradient(float b, int64_t k, const ScapeCatchUpScalars& s) {
  return b / ((1.0f - s.beta1) * static_cast<float>(k));
}

// A coordinate synchronized after K steps with value b: v̄ refreshed, m
// caught up by K steps, θ moved `steps` steps' worth (θ already decayed).
CORESCAPE_HOST_DEVICE void ScapeCatchUpOnMask(float& theta, float& m, float& vbar, float b,
                                              int64_t k, float b1k, float steps,
                                              const ScapeCatchUpScalars& s) {
  const float g_hat = CatchUpMeanGradient(b, k, s);
  const float v = s.beta2 * m * m + (1.0f - s.beta2) * g_hat * g_hat;
  vbar = s.first_step ? v : s.rho * vbar + (1.0f - s.rho) * v;
  m = b1k * m + (1.0f - b1k) * g_hat;
  theta -= s.lr * steps * m / (sqrtf(v) + s.eps);
}

// The ages of a mask's coordinates (a null mask: every coordinate in
// order), kept where the update runs. `synced[j]` is 1 + the step j was
// last synchronized (0: never, so zeroed memory is a fresh state); at step
// t, with stamp = t + 1, the mask's p-th coordinate j covered windows[p] =
// stamp − synced[j] ≥ 1 steps, and is synchronized now: synced[j] = stamp.
// A mask names each j once, so every p is independent. A null `windows`
// only sets the ages.
CORESCAPE_HOST_DEVICE void StampSyncedElement(int64_t p, const int64_t* mask, int32_t stamp,
                                              int32_t* synced, int32_t* windows) {
  const int64_t j = mask != nullptr ? mask[p] : p;
  if (windows != nullptr) windows[p] = stamp - synced[j];
  synced[j] = stamp;
}

// ---- SCAPE's mask statistic (what each rank ranks its range by) ----
enum class MaskStatistic {
  kMomentumPlusResidual,  // |β1·m + e^r|
  kResidual,              // |e^r|
  kMomentum,              // |m|
  kNormalizedResidual,    // |e^r| / (√v̄ + ε): pending movement in steps
  kMomentumPlusScaledResidual,  // |β1·m + P·e^r|: e^r is rank r's 1/P share
                                // of the global residual, scaled up to estimate it
};

struct MaskStatisticScalars {
  float beta1, eps;
  float world;  // P
};

// One coordinate's statistic. Written per statistic so a loop over one
// (the statistic a constant) vectorizes.
CORESCAPE_HOST_DEVICE float MaskStatisticElement(MaskStatistic statistic, float m, float e, float v,
                                                 const MaskStatisticScalars& s) {
  switch (statistic) {
    case MaskStatistic::kMomentumPlusResidual: return fabsf(s.beta1 * m + e);
    case MaskStatistic::kResidual: return fabsf(e);
    case MaskStatistic::kMomentum: return fabsf(m);
    case MaskStatistic::kNormalizedResidual: return fabsf(e) / (sqrtf(v) + s.eps);
    case MaskStatistic::kMomentumPlusScaledResidual: return fabsf(s.beta1 * m + s.world * e);
  }
  return 0.0f;
}

// The factor ClipGradientNorm (runtime/optim/adamw.cc) scales by, given the
// norm: 1 when no clipping applies.
CORESCAPE_HOST_DEVICE float ClipScale(double norm, double max_norm) {
  return max_norm > 0.0 && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.0f;
}

}  // namespace corescape::kernels::host_device

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_UPDATES_H_
