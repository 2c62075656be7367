#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_H_

// The key the device top-k sorts by, so that a stable descending radix sort
// picks the set optim::SelectTopK (runtime/optim/sparse_mask.h) picks: NaN
// counts as −∞ and −0 as +0 (the CPU compares them equal; a radix sort of
// the bits would not), ties then go to the lower index by stability.
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

CORESCAPE_HOST_DEVICE float TopKKey(float statistic) {
  if (statistic != statistic) return -INFINITY;
  return statistic == 0.0f ? 0.0f : statistic;
}

// What the top-k ranks: the values themselves, or their magnitudes (SCAPE's
// reference statistic |e|, read straight from the residual).
enum class TopKBy { kValue, kMagnitude };

CORESCAPE_HOST_DEVICE float TopKKey(float value, TopKBy by) {
  // -x, not fabsf: the same on both sides of the compiler; −0 becomes +0,
  // NaN stays NaN.
  return TopKKey(by == TopKBy::kMagnitude && value < 0.0f ? -value : value);
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_H_
