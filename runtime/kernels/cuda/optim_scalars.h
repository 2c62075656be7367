#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_SCALARS_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_SCALARS_H_

// The per-step scalars of the optimizer bodies (optim_updates.h), computed
// on the host in double as runtime/optim computes them, then rounded once.
#include <cmath>
#include <cstdint>

#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/optim/adam_config.h"

namespace corescape::kernels::cuda {

// `step` counts from 1 (the step being taken).
inline AdamWScalars AdamWScalarsAt(const optim::AdamConfig& c, int64_t step, double lr) {
  const double bias1 = 1.0 - std::pow(c.beta1, static_cast<double>(step));
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(c.beta2, static_cast<double>(step)));
  return {static_cast<float>(c.beta1),          static_cast<float>(c.beta2),
          static_cast<float>(c.epsilon),        static_cast<float>(lr / bias1),
          static_cast<float>(1.0 - lr * c.weight_decay), static_cast<float>(1.0 / bias2_sqrt)};
}

inline AdamSScalars AdamSScalarsAt(const optim::AdamConfig& c, double lr) {
  return {static_cast<float>(c.beta1), static_cast<float>(c.beta2), static_cast<float>(c.epsilon),
          static_cast<float>(lr), static_cast<float>(1.0 - lr * c.weight_decay)};
}

// `step` counts from 1 (the step being taken); P ranks.
inline ScapeReferenceScalars ScapeReferenceScalarsAt(const optim::AdamConfig& c, int64_t step,
                                                     double lr, int world_size) {
  ScapeReferenceScalars s;
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

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_OPTIM_SCALARS_H_
