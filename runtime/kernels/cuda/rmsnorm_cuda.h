#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_RMSNORM_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_RMSNORM_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace corescape::kernels::cuda {

// As RmsNormForward / RmsNormBackward (runtime/kernels/cpu/rmsnorm.h) on
// device buffers: a block per row (its sums as block trees), then a block
// per 32 columns of dweight (row partials added as a tree). Deterministic;
// the sums run in another order than the CPU's, so the results differ from
// it in the last bits.
absl::Status LaunchRmsNormForward(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
                                  int64_t dim, float eps, cudaStream_t stream);
absl::Status LaunchRmsNormBackward(const float* x, const float* weight, const float* rstd, const float* dy,
                                   float* dx, float* dweight, int64_t rows, int64_t dim, cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_RMSNORM_CUDA_H_
