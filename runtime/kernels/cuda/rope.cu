#include "runtime/kernels/cuda/launch_util.cuh"
#include "runtime/kernels/cuda/rope.h"
#include "runtime/kernels/cuda/rope_cuda.h"

namespace corescape::kernels::cuda {
namespace {

__global__ void RopeKernel(float* x, const int32_t* positions, int64_t rows, int heads, int head_dim,
                           double theta, double direction) {
  const int pairs = head_dim / 2;
  const int64_t n = rows * heads * pairs;
  for (int64_t t = GridStart(); t < n; t += GridStride()) {
    const int pair = static_cast<int>(t % pairs);
    const int64_t row_head = t / pairs;  // row·heads + head
    const int64_t row = row_head / heads;
    RopeRotatePair(x + row_head * head_dim, pair, head_dim, positions[row], theta, direction);
  }
}

}  // namespace

absl::Status LaunchRope(float* x, const int32_t* positions, int64_t rows, int heads, int head_dim,
                        double theta, double direction, cudaStream_t stream) {
  const int64_t n = rows * heads * (head_dim / 2);
  if (n <= 0) return absl::OkStatus();
  RopeKernel<<<BlocksFor(n), kThreads, 0, stream>>>(x, positions, rows, heads, head_dim, theta, direction);
  return LaunchStatus("LaunchRope");
}

}  // namespace corescape::kernels::cuda
