#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_SWIGLU_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_SWIGLU_H_

// Element bodies of runtime/kernels/cpu/swiglu.cc: h = silu(gate)·up,
// silu'(g) = σ(g)·(1 + g·(1 − σ(g))).
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

CORESCAPE_HOST_DEVICE float SwiGluForwardElement(float gate, float up) {
  const float sigmoid = 1.0f / (1.0f + expf(-gate));
  return gate * sigmoid * up;
}

CORESCAPE_HOST_DEVICE void SwiGluBackwardElement(float gate, float up, float d_h, float& d_gate,
                                                 float& d_up) {
  const float sigmoid = 1.0f / (1.0f + expf(-gate));
  const float silu = gate * sigmoid;
  d_up = d_h * silu;
  d_gate = d_h * up * sigmoid * (1.0f + gate * (1.0f - sigmoid));
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_SWIGLU_H_
