#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/cross_entropy_cuda.h"
#include "runtime/kernels/cuda/launch_util.cuh"

namespace corescape::kernels::cuda {
namespace {

__global__ void CrossEntropyKernel(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                   float* d_logits, float grad_scale, double* row_losses, uint8_t* counted) {
  for (int64_t r = GridStart(); r < rows; r += GridStride()) {
    bool c = false;
    row_losses[r] = CrossEntropyRow(logits + r * vocab, targets[r], vocab,
                                    d_logits != nullptr ? d_logits + r * vocab : nullptr, grad_scale, &c);
    counted[r] = c ? 1 : 0;
  }
}

}  // namespace

absl::Status LaunchCrossEntropy(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                float* d_logits, float grad_scale, double* row_losses, uint8_t* counted,
                                cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return absl::OkStatus();
  CrossEntropyKernel<<<BlocksFor(rows), kThreads, 0, stream>>>(logits, targets, rows, vocab, d_logits,
                                                                grad_scale, row_losses, counted);
  return LaunchStatus("LaunchCrossEntropy");
}

}  // namespace corescape::kernels::cuda
