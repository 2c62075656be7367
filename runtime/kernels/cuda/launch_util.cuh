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

// Combines partial[0, kThreads) pairwise as a tree into partial[0]: a fixed
// order, so the same inputs give the same bits (an atomic would not).
// Every thread of a kThreads-thread block calls it once its partial is
// written and a __syncthreads has passed.
template <typename T, typename Combine>
__device__ void BlockTreeReduce(T* partial, Combine combine) {
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] = combine(partial[threadIdx.x], partial[threadIdx.x + width]);
    __syncthreads();
  }
}

struct DeviceSum {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

inline absl::Status LaunchStatus(const char* launch) {
  return device::CudaStatus(cudaGetLastError(), launch);
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_LAUNCH_UTIL_CUH_
