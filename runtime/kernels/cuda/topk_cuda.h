#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/kernels/cuda/topk.h"

namespace corescape::kernels::cuda {

// Device scratch SelectTopKOnDevice needs for a range of n coordinates.
absl::StatusOr<size_t> TopKScratchBytes(int64_t n);

// The k coordinates of [begin, begin + n) with the largest statistic,
// ascending, into out_indices[k] — the set optim::SelectTopK returns (NaN as
// −∞, ties to the lower index): the radix select of topk.h (four histogram
// passes over the keys, then per-tile counts, their scans and one ordered
// take pass; no sort). `scratch` holds TopKScratchBytes(n) bytes (a few
// bytes per 2048 entries). k is clamped to [0, n]. With TopKBy::kMagnitude
// the statistic is |statistic[i]|.
absl::Status SelectTopKOnDevice(const float* statistic, int64_t n, int64_t begin, int64_t k,
                                int64_t* out_indices, void* scratch, size_t scratch_bytes,
                                cudaStream_t stream, TopKBy by = TopKBy::kValue);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_CUDA_H_
