#include "runtime/kernels/cuda/casts.h"
#include "runtime/kernels/cuda/casts_cuda.h"
#include "runtime/kernels/cuda/launch_util.cuh"

namespace corescape::kernels::cuda {
namespace {

__global__ void Bf16FromFloatKernel(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) out[i] = Bf16FromFloat(in[i]);
}

__global__ void FloatFromBf16Kernel(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) out[i] = FloatFromBf16(in[i]);
}

}  // namespace

absl::Status LaunchBf16FromFloat(const float* in, uint16_t* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  Bf16FromFloatKernel<<<BlocksFor(n), kThreads, 0, stream>>>(in, out, n);
  return LaunchStatus("LaunchBf16FromFloat");
}

absl::Status LaunchFloatFromBf16(const uint16_t* in, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  FloatFromBf16Kernel<<<BlocksFor(n), kThreads, 0, stream>>>(in, out, n);
  return LaunchStatus("LaunchFloatFromBf16");
}

}  // namespace corescape::kernels::cuda
