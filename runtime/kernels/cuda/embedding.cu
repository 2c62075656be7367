#include "runtime/kernels/cuda/embedding.h"
#include "runtime/kernels/cuda/embedding_cuda.h"
#include "runtime/kernels/cuda/launch_util.cuh"

namespace corescape::kernels::cuda {
namespace {

__global__ void ForwardKernel(const int32_t* tokens, const float* table, float* out, int64_t rows,
                              int64_t dim) {
  const int64_t n = rows * dim;
  for (int64_t t = GridStart(); t < n; t += GridStride()) {
    EmbeddingForwardElement(tokens, table, out, t / dim, t % dim, dim);
  }
}

__global__ void BackwardKernel(const int32_t* tokens, const float* d_out, float* d_table, int64_t rows,
                               int64_t dim) {
  for (int64_t i = GridStart(); i < dim; i += GridStride()) {
    EmbeddingBackwardColumn(tokens, d_out, d_table, i, rows, dim);
  }
}

}  // namespace

absl::Status LaunchEmbeddingForward(const int32_t* tokens, const float* table, float* out, int64_t rows,
                                    int64_t dim, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return absl::OkStatus();
  ForwardKernel<<<BlocksFor(rows * dim), kThreads, 0, stream>>>(tokens, table, out, rows, dim);
  return LaunchStatus("LaunchEmbeddingForward");
}

absl::Status LaunchEmbeddingBackward(const int32_t* tokens, const float* d_out, float* d_table, int64_t rows,
                                     int64_t dim, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return absl::OkStatus();
  BackwardKernel<<<BlocksFor(dim), kThreads, 0, stream>>>(tokens, d_out, d_table, rows, dim);
  return LaunchStatus("LaunchEmbeddingBackward");
}

}  // namespace corescape::kernels::cuda
