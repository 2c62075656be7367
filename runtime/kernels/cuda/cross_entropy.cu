#include <cstdint>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/cuda/cross_entropy.h"
#include "runtime/kernels/cuda/cross_entropy_cuda.h"
#include "runtime/kernels/cuda/launch_util.cuh"

namespace corescape::kernels::cuda {
namespace {

struct LargerOf {
  // The later of equal values, as `if (max < z) max = z` keeps the first:
  // the value is the same either way.
  __device__ float operator()(float a, float b) const { return a < b ? b : a; }
};

// One block of kThreads per row (the CrossEntropyRow arithmetic, spread):
// the row's maximum and normalizer as block trees, then its gradient, every
// pass reading the row coalesced.
__global__ void CrossEntropyKernel(const float* logits, const int32_t* targets, int64_t vocab, float* d_logits,
                                   float grad_scale, double* row_losses, uint8_t* counted) {
  __shared__ float max_partial[kThreads];
  __shared__ double sum_partial[kThreads];
  const int64_t r = blockIdx.x;
  const float* z = logits + r * vocab;
  float* dz = d_logits != nullptr ? d_logits + r * vocab : nullptr;
  const int32_t target = targets[r];
  if (target < 0) {
    if (dz != nullptr) {
      for (int64_t i = threadIdx.x; i < vocab; i += kThreads) dz[i] = 0.0f;
    }
    if (threadIdx.x == 0) {
      row_losses[r] = 0.0;
      counted[r] = 0;
    }
    return;
  }
  float max = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) max = LargerOf()(max, z[i]);
  max_partial[threadIdx.x] = max;
  __syncthreads();
  BlockTreeReduce(max_partial, LargerOf());
  max = max_partial[0];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) sum += CrossEntropyExpTerm(z[i], max);
  sum_partial[threadIdx.x] = sum;
  __syncthreads();
  BlockTreeReduce(sum_partial, DeviceSum());
  const double log_sum = log(sum_partial[0]) + max;
  // The loss reads z[target] before any gradient is written, as the CPU
  // reference does.
  if (threadIdx.x == 0) {
    row_losses[r] = log_sum - z[target];
    counted[r] = 1;
  }
  __syncthreads();
  if (dz != nullptr) {
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      dz[i] = CrossEntropyGrad(z[i], log_sum, grad_scale, i == target);
    }
  }
}

}  // namespace

absl::Status LaunchCrossEntropy(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                                float* d_logits, float grad_scale, double* row_losses, uint8_t* counted,
                                cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return absl::OkStatus();
  if (rows > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("LaunchCrossEntropy: ", rows, " rows (at most ", INT32_MAX, ")"));
  }
  CrossEntropyKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, targets, vocab, d_logits,
                                                                          grad_scale, row_losses, counted);
  return LaunchStatus("LaunchCrossEntropy");
}

}  // namespace corescape::kernels::cuda
