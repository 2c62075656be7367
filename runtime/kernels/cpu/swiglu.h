#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_SWIGLU_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_SWIGLU_H_

#include <cstdint>

namespace corescape::kernels {

// h = silu(gate) * up, elementwise over n values.
void SwiGluForward(const float* gate, const float* up, float* h, int64_t n);

// d_gate, d_up (overwritten) from d_h.
void SwiGluBackward(const float* gate, const float* up, const float* d_h,
                    float* d_gate, float* d_up, int64_t n);

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_SWIGLU_H_
