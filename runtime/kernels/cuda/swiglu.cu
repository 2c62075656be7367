#include "runtime/kernels/cuda/launch_util.cuh"
#include "runtime/kernels/cuda/swiglu.h"
#include "runtime/kernels/cuda/swiglu_cuda.h"

namespace corescape::kernels::cuda {
namespace {

__global__ void ForwardKernel(const float* gate, const float* up, float* h, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) h[i] = SwiGluForwardElement(gate[i], up[i]);
}

__global__ void BackwardKernel(const float* gate, const float* up, const float* d_h, float* d_gate,
                               float* d_up, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    SwiGluBackwardElement(gate[i], up[i], d_h[i], d_gate[i], d_up[i]);
  }
}

}  // namespace

absl::Status LaunchSwiGluForward(const float* gate, const float* up, float* h, int64_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  ForwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(gate, up, h, n);
  return LaunchStatus("LaunchSwiGluForward");
}

absl::Status LaunchSwiGluBackward(const float* gate, const float* up, const float* d_h, float* d_gate,
                                  float* d_up, int64_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  BackwardKernel<<<BlocksFor(n), kThreads, 0, stream>>>(gate, up, d_h, d_gate, d_up, n);
  return LaunchStatus("LaunchSwiGluBackward");
}

}  // namespace corescape::kernels::cuda
