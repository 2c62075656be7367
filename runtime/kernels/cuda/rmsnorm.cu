#include "runtime/kernels/cuda/launch_util.cuh"
#include "runtime/kernels/cuda/rmsnorm.h"
#include "runtime/kernels/cuda/rmsnorm_cuda.h"

namespace corescape::kernels::cuda {
namespace {

__global__ void ForwardKernel(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
                              int64_t dim, float eps) {
  for (int64_t r = GridStart(); r < rows; r += GridStride()) {
    rstd[r] = RmsNormForwardRow(x + r * dim, weight, y + r * dim, dim, eps);
  }
}

__global__ void BackwardRowsKernel(const float* x, const float* weight, const float* rstd, const float* dy,
                                   float* dx, int64_t rows, int64_t dim) {
  for (int64_t r = GridStart(); r < rows; r += GridStride()) {
    RmsNormBackwardRow(x + r * dim, weight, rstd[r], dy + r * dim, dx + r * dim, dim);
  }
}

__global__ void WeightGradKernel(const float* x, const float* rstd, const float* dy, float* dweight,
                                 int64_t rows, int64_t dim) {
  for (int64_t i = GridStart(); i < dim; i += GridStride()) {
    RmsNormWeightGradColumn(x, rstd, dy, dweight, i, rows, dim);
  }
}

}  // namespace

absl::Status LaunchRmsNormForward(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
                                  int64_t dim, float eps, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return absl::OkStatus();
  ForwardKernel<<<BlocksFor(rows), kThreads, 0, stream>>>(x, weight, y, rstd, rows, dim, eps);
  return LaunchStatus("LaunchRmsNormForward");
}

absl::Status LaunchRmsNormBackward(const float* x, const float* weight, const float* rstd, const float* dy,
                                   float* dx, float* dweight, int64_t rows, int64_t dim, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return absl::OkStatus();
  BackwardRowsKernel<<<BlocksFor(rows), kThreads, 0, stream>>>(x, weight, rstd, dy, dx, rows, dim);
  if (absl::Status s = LaunchStatus("LaunchRmsNormBackward (rows)"); !s.ok()) return s;
  WeightGradKernel<<<BlocksFor(dim), kThreads, 0, stream>>>(x, rstd, dy, dweight, rows, dim);
  return LaunchStatus("LaunchRmsNormBackward (weight)");
}

}  // namespace corescape::kernels::cuda
