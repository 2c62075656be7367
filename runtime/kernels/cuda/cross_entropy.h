#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CROSS_ENTROPY_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CROSS_ENTROPY_H_

// The row body of runtime/kernels/cpu/cross_entropy.cc: softmax
// cross-entropy of one row of logits against its target (−1: ignored), the
// normalizer summed in double; d_logits = (softmax − onehot)·grad_scale.
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

// The row's terms, one element each (a launch may spread a row over a
// block): e^(z − max) of the normalizer, and the gradient
// (softmax − onehot)·grad_scale given log Σ e^z.
CORESCAPE_HOST_DEVICE double CrossEntropyExpTerm(float z, float max) { return exp(static_cast<double>(z - max)); }
CORESCAPE_HOST_DEVICE float CrossEntropyGrad(float z, double log_sum, float grad_scale, bool is_target) {
  const float g = static_cast<float>(exp(z - log_sum)) * grad_scale;
  return is_target ? g - grad_scale : g;
}

// The row's loss (0 for an ignored row, which `counted` reports); writes dz
// when it is not null (zeros for an ignored row).
CORESCAPE_HOST_DEVICE double CrossEntropyRow(const float* z, int32_t target, int64_t vocab, float* dz,
                                             float grad_scale, bool* counted) {
  if (target < 0) {
    *counted = false;
    if (dz != nullptr) {
      for (int64_t i = 0; i < vocab; ++i) dz[i] = 0.0f;
    }
    return 0.0;
  }
  *counted = true;
  float max = z[0];  // the first largest, as std::max_element
  for (int64_t i = 1; i < vocab; ++i) {
    if (max < z[i]) max = z[i];
  }
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += CrossEntropyExpTerm(z[i], max);
  const double log_sum = log(sum) + max;
  if (dz != nullptr) {
    for (int64_t i = 0; i < vocab; ++i) dz[i] = CrossEntropyGrad(z[i], log_sum, grad_scale, i == target);
  }
  return log_sum - z[target];
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CROSS_ENTROPY_H_
