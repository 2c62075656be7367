#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CASTS_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CASTS_H_

// bf16 <-> fp32: bf16 is the upper half of an fp32 (1 sign, 8 exponent, 7
// mantissa bits), stored here as its uint16_t bit pattern so host and device
// code share one type.
#include <string.h>

#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

CORESCAPE_HOST_DEVICE uint32_t FloatBits(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
}

CORESCAPE_HOST_DEVICE float FloatFromBits(uint32_t bits) {
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

// Round to nearest, ties to even (what PyTorch's and CUDA's __float2bfloat16
// do): add 0x7FFF plus the lowest kept bit, then truncate. Overflow rounds
// to ±inf. NaN stays NaN with its sign: a quiet NaN (the rounding could
// otherwise carry a NaN's payload into the exponent, or clear the mantissa
// and make it inf).
CORESCAPE_HOST_DEVICE uint16_t Bf16FromFloat(float x) {
  const uint32_t bits = FloatBits(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t lowest_kept = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7FFFu + lowest_kept) >> 16);
}

// Exact: every bf16 is an fp32.
CORESCAPE_HOST_DEVICE float FloatFromBf16(uint16_t h) {
  return FloatFromBits(static_cast<uint32_t>(h) << 16);
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CASTS_H_
