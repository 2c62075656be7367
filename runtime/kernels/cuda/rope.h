#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_ROPE_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_ROPE_H_

// The pair body of runtime/kernels/cpu/rope.cc: (x[2i], x[2i+1]) of a head
// rotated by position·theta^(−2i/head_dim), the angle in double (positions
// reach 10^5+ and float loses the phase), its cosine and sine then in float.
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

// direction +1: forward; −1: backward (the transpose).
CORESCAPE_HOST_DEVICE void RopeRotatePair(float* head, int pair, int head_dim, int32_t position,
                                          double theta, double direction) {
  const double inverse_frequency = pow(theta, -2.0 * pair / head_dim);
  const double angle = direction * position * inverse_frequency;
  const float c = static_cast<float>(cos(angle));
  const float s = static_cast<float>(sin(angle));
  const float a = head[2 * pair], b = head[2 * pair + 1];
  head[2 * pair] = a * c - b * s;
  head[2 * pair + 1] = a * s + b * c;
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_ROPE_H_
