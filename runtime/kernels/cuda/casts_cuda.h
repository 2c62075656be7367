#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CASTS_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CASTS_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace corescape::kernels::cuda {

// fp32 -> bf16 (round to nearest even) and back, n values on the device.
absl::Status LaunchBf16FromFloat(const float* in, uint16_t* out, int64_t n, cudaStream_t stream);
absl::Status LaunchFloatFromBf16(const uint16_t* in, float* out, int64_t n, cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CASTS_CUDA_H_
