#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_LAUNCH_UTIL_CUH_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_LAUNCH_UTIL_CUH_

// What every launch file shares (nvcc only): grid sizing for grid-stride
// loops and the status of the launch just made.
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/device/cuda_status.h"

namespace corescape::kernels::cuda {

inline constexpr int kThreads = 256;

// Blocks for n work items, capped: the loops stride over the rest.
inline unsigned BlocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

__device__ __forceinline__ int64_t GridStart() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

inline absl::Status LaunchStatus(const char* launch) {
  return device::CudaStatus(cudaGetLastError(), launch);
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_LAUNCH_UTIL_CUH_
