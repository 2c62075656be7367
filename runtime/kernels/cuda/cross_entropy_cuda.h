#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CROSS_ENTROPY_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CROSS_ENTROPY_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace corescape::kernels::cuda {

// CrossEntropyRow's arithmetic (cross_entropy.h) for every row, one block
// per row: row_losses[r] (double, 0 if ignored) and counted[r] (0/1);
// d_logits may be null. The normalizer is summed as a tree over the block,
// not left to right, so it differs from the CPU's in the last bits of the
// double. The caller sums the rows in order for the CPU kernel's loss_sum.
absl::Status LaunchCrossEntropy(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                float* d_logits, float grad_scale, double* row_losses, uint8_t* counted,
                                cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CROSS_ENTROPY_CUDA_H_
