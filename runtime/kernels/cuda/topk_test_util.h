// What a segmented top-k must give, for the tests of its host and device runs.
#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_TEST_UTIL_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "runtime/kernels/cuda/topk.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::kernels::cuda {

// Each segment's optim::SelectTopK over its part of `statistic`, as
// begin + offset + i, one segment after another.
inline std::vector<int64_t> SelectTopKPerSegment(const std::vector<float>& statistic,
                                                 const std::vector<host_device::TopKSegment>& segments,
                                                 int64_t begin) {
  std::vector<int64_t> selected;
  for (const host_device::TopKSegment& segment : segments) {
    const std::vector<float> part(statistic.begin() + segment.offset,
                                  statistic.begin() + segment.offset + segment.numel);
    const std::vector<int64_t> top = optim::SelectTopK(part, begin + segment.offset, segment.k);
    selected.insert(selected.end(), top.begin(), top.end());
  }
  return selected;
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_TEST_UTIL_H_
