#include <cstdint>

#include "runtime/kernels/cuda/launch_util.cuh"
#include "runtime/kernels/cuda/rmsnorm.h"
#include "runtime/kernels/cuda/rmsnorm_cuda.h"

namespace corescape::kernels::cuda {
namespace {

// Rows: one block of kThreads per row, its sums as block trees (a fixed
// order: deterministic), every pass reading the row coalesced.
__global__ void ForwardKernel(const float* x, const float* weight, float* y, float* rstd, int64_t dim, float eps) {
  __shared__ float partial[kThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * dim;
  float sum_squares = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) sum_squares += xr[i] * xr[i];
  partial[threadIdx.x] = sum_squares;
  __syncthreads();
  BlockTreeReduce(partial, DeviceSum());
  const float s = RmsNormScale(partial[0], dim, eps);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) y[r * dim + i] = RmsNormOutput(xr[i], s, weight[i]);
  if (threadIdx.x == 0) rstd[r] = s;
}

__global__ void BackwardRowsKernel(const float* x, const float* weight, const float* rstd, const float* dy,
                                   float* dx, int64_t dim) {
  __shared__ float partial[kThreads];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * dim;
  const float* dyr = dy + r * dim;
  float dot = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) dot += dyr[i] * weight[i] * xr[i];
  partial[threadIdx.x] = dot;
  __syncthreads();
  BlockTreeReduce(partial, DeviceSum());
  const float s = rstd[r];
  const float c = RmsNormGradCoefficient(s, partial[0], dim);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    dx[r * dim + i] += RmsNormInputGrad(xr[i], weight[i], dyr[i], s, c);
  }
}

// dweight: a block per 32 columns; its warps take every kWeightGradWarps-th
// row (a warp reads 32 adjacent columns of a row: coalesced), then the
// warps' partial sums are added as a tree, so many blocks share the rows
// without atomics and the order is fixed.
constexpr int kWeightGradWarps = kThreads / 32;

__global__ void WeightGradKernel(const float* x, const float* rstd, const float* dy, float* dweight, int64_t rows,
                                 int64_t dim) {
  __shared__ float partial[kThreads];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t i = int64_t{blockIdx.x} * 32 + lane;
  float acc = 0.0f;
  if (i < dim) {
    for (int64_t r = warp; r < rows; r += kWeightGradWarps) {
      acc += RmsNormWeightGradTerm(dy[r * dim + i], x[r * dim + i], rstd[r]);
    }
  }
  // partial[lane * warps + warp]: each column's warps side by side.
  partial[lane * kWeightGradWarps + warp] = acc;
  __syncthreads();
  if (warp == 0 && i < dim) {
    float* column = partial + lane * kWeightGradWarps;
    for (int width = kWeightGradWarps / 2; width > 0; width /= 2) {
      for (int w = 0; w < width; ++w) column[w] += column[w + width];
    }
    dweight[i] += column[0];
  }
}

}  // namespace

absl::Status LaunchRmsNormForward(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
                                  int64_t dim, float eps, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return absl::OkStatus();
  if (rows > INT32_MAX) return absl::InvalidArgumentError("LaunchRmsNormForward: more than 2^31 − 1 rows");
  ForwardKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, y, rstd, dim, eps);
  return LaunchStatus("LaunchRmsNormForward");
}

absl::Status LaunchRmsNormBackward(const float* x, const float* weight, const float* rstd, const float* dy,
                                   float* dx, float* dweight, int64_t rows, int64_t dim, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return absl::OkStatus();
  if (rows > INT32_MAX) return absl::InvalidArgumentError("LaunchRmsNormBackward: more than 2^31 − 1 rows");
  BackwardRowsKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, weight, rstd, dy, dx, dim);
  if (absl::Status s = LaunchStatus("LaunchRmsNormBackward (rows)"); !s.ok()) return s;
  WeightGradKernel<<<static_cast<unsigned>((dim + 31) / 32), kThreads, 0, stream>>>(x, rstd, dy, dweight, rows,
                                                                                   dim);
  return LaunchStatus("LaunchRmsNormBackward (weight)");
}

}  // namespace corescape::kernels::cuda
