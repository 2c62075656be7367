#ifndef CORESCAPE_RUNTIME_OPTIM_OPTIM_SCALARS_H_
#define CORESCAPE_RUNTIME_OPTIM_OPTIM_SCALARS_H_

// The per-step scalars of the optimizers' per-coordinate bodies
// (runtime/kernels/cuda/optim_updates.h), computed on the host in double,
// then rounded once: the host loops and the device launches take the same.
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/optim/adam_config.h"

namespace corescape::optim {

// `step` counts from 1 (the step being taken).
inline kernels::host_device::AdamWScalars AdamWScalarsAt(const AdamConfig& c, int64_t step, double lr) {
  const double bias1 = 1.0 - std::pow(c.beta1, static_cast<double>(step));
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(c.beta2, static_cast<double>(step)));
  return {static_cast<float>(c.beta1),          static_cast<float>(c.beta2),
          static_cast<float>(c.epsilon),        static_cast<float>(lr / bias1),
          static_cast<float>(1.0 - lr * c.weight_decay), static_cast<float>(1.0 / bias2_sqrt)};
}

inline kernels::host_device::AdamSScalars AdamSScalarsAt(const AdamConfig& c, double lr) {
  return {static_cast<float>(c.beta1), static_cast<float>(c.beta2), static_cast<float>(c.epsilon),
          static_cast<float>(lr), static_cast<float>(1.0 - lr * c.weight_decay)};
}

// SCAPE's reference rule; `step` counts from 1 (the step being taken); P ranks.
inline kernels::host_device::ScapeReferenceScalars ScapeReferenceScalarsAt(const AdamConfig& c,
                                                                    int64_t step, double lr,
                                                                    int world_size) {
  kernels::host_device::ScapeReferenceScalars s;
  s.beta1 = static_cast<float>(c.beta1);
  s.beta2 = static_cast<float>(c.beta2);
  s.eps = static_cast<float>(c.epsilon);
  s.lr = static_cast<float>(lr);
  s.decay = static_cast<float>(1.0 - lr * c.weight_decay);
  s.payload_one_minus_beta1 = static_cast<float>(1.0 - c.beta1);
  s.world = static_cast<float>(world_size);
  s.inverse_ranks = 1.0f / static_cast<float>(world_size);
  s.correction1 = static_cast<float>(1.0 - std::pow(c.beta1, static_cast<double>(step)));
  s.sqrt_correction2 = static_cast<float>(std::sqrt(1.0 - std::pow(c.beta2, static_cast<double>(step))));
  return s;
}

// SCAPE's catch-up rule for the step being taken (first_step: t = 0), with
// ρ the smoothed normalizer's.
inline kernels::host_device::ScapeCatchUpScalars ScapeCatchUpScalarsAt(const AdamConfig& c, double lr,
                                                                double normalizer_beta,
                                                                bool first_step) {
  kernels::host_device::ScapeCatchUpScalars s;
  s.beta1 = static_cast<float>(c.beta1);
  s.beta2 = static_cast<float>(c.beta2);
  s.eps = static_cast<float>(c.epsilon);
  s.lr = static_cast<float>(lr);
  s.decay = static_cast<float>(1.0 - lr * c.weight_decay);
  s.rho = static_cast<float>(normalizer_beta);
  s.residual_one_minus_beta1 = static_cast<float>(1.0 - c.beta1);
  s.first_step = first_step;
  return s;
}

inline kernels::host_device::MaskStatisticScalars MaskStatisticScalarsOf(const AdamConfig& c,
                                                                  int world_size) {
  return {static_cast<float>(c.beta1), static_cast<float>(c.epsilon),
          static_cast<float>(world_size)};
}

// β1^K and K^α for K < `windows` (entry 0 unused): the std::pow values,
// computed once per K rather than per coordinate (most windows are short).
struct CatchUpPowerTables {
  double beta1 = 0, exponent = 1;
  std::vector<float> b1_to_k, k_to_alpha;
  int64_t size() const { return static_cast<int64_t>(b1_to_k.size()); }
  // The tables as the bodies read them, from host memory.
  kernels::host_device::CatchUpPowers OnHost() const {
    return {b1_to_k.data(), k_to_alpha.data(), size(), beta1, exponent};
  }
};
// Windows the tables hold: longer ones are computed by the bodies (the same
// values: std::pow rounded to float either way).
inline constexpr int64_t kCatchUpCachedWindows = 256;
inline CatchUpPowerTables CatchUpPowerTablesOf(double beta1, double exponent, int64_t windows) {
  CatchUpPowerTables tables;
  tables.beta1 = beta1;
  tables.exponent = exponent;
  tables.b1_to_k.assign(windows, 0.0f);
  tables.k_to_alpha.assign(windows, 0.0f);
  for (int64_t k = 1; k < windows; ++k) {
    tables.b1_to_k[k] = static_cast<float>(std::pow(beta1, static_cast<double>(k)));
    tables.k_to_alpha[k] = static_cast<float>(std::pow(static_cast<double>(k), exponent));
  }
  return tables;
}

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_OPTIM_SCALARS_H_
