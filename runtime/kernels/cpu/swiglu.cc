#include "runtime/kernels/cpu/swiglu.h"

#include <cmath>

namespace corescape::kernels {

void SwiGluForward(const float* gate, const float* up, float* h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float sigmoid = 1.0f / (1.0f + std::exp(-gate[i]));
    h[i] = gate[i] * sigmoid * up[i];
  }
}

void SwiGluBackward(const float* gate, const float* up, const float* d_h,
                    float* d_gate, float* d_up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float sigmoid = 1.0f / (1.0f + std::exp(-g));
    const float silu = g * sigmoid;
    d_up[i] = d_h[i] * silu;
    // silu'(g) = σ(g) (1 + g (1 − σ(g)))
    d_gate[i] = d_h[i] * up[i] * sigmoid * (1.0f + g * (1.0f - sigmoid));
  }
}

}  // namespace corescape::kernels
