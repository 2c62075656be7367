#include <cstdint>

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

// A block per 32 columns; its warps split the tokens into kTokenClasses
// classes (a warp reads 32 adjacent columns of its rows: coalesced), so a
// table of d columns keeps d/4 warps busy instead of d/32.
constexpr int kTokenClasses = kThreads / 32;

__global__ void BackwardKernel(const int32_t* tokens, const float* d_out, float* d_table, int64_t rows,
                               int64_t dim) {
  const int64_t i = int64_t{blockIdx.x} * 32 + threadIdx.x % 32;
  if (i < dim) {
    EmbeddingBackwardColumn(tokens, d_out, d_table, i, rows, dim, static_cast<int32_t>(threadIdx.x / 32),
                            kTokenClasses);
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
  if (dim > int64_t{INT32_MAX} * 32) return absl::InvalidArgumentError("LaunchEmbeddingBackward: dim too large");
  BackwardKernel<<<static_cast<unsigned>((dim + 31) / 32), kThreads, 0, stream>>>(tokens, d_out, d_table, rows, dim);
  return LaunchStatus("LaunchEmbeddingBackward");
}

}  // namespace corescape::kernels::cuda
