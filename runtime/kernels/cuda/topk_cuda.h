#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/kernels/cuda/topk.h"

namespace corescape::kernels::cuda {

// Device scratch SelectTopKInSegments needs for `segments`, and
// SelectTopKOnDevice for a range of n coordinates.
absl::StatusOr<size_t> TopKScratchBytes(absl::Span<const host_device::TopKSegment> segments);
absl::StatusOr<size_t> TopKScratchBytes(int64_t n);

// Each segment's k coordinates of statistic[offset, offset + numel) with the
// largest statistic, as begin + offset + i, ascending, the segments' one
// after another into out_indices (Σ k entries) — per segment the set
// optim::SelectTopK returns (NaN as −∞, ties to the lower index): the radix
// select of topk.h (four histogram passes over the keys, then per-tile
// counts, their scans and one ordered take pass; no sort), every segment in
// the same launches. `scratch` holds TopKScratchBytes(segments) bytes (a
// few bytes per 2048 entries, 2 KiB per segment). Each k is clamped to
// [0, numel]; a segment is at most 2^31 − 1 long. With host_device::TopKBy::kMagnitude
// the statistic is |statistic[i]|. The segments are copied to the device
// before the call returns.
absl::Status SelectTopKInSegments(const float* statistic, absl::Span<const host_device::TopKSegment> segments,
                                  int64_t begin, int64_t* out_indices, void* scratch,
                                  size_t scratch_bytes, cudaStream_t stream,
                                  host_device::TopKBy by = host_device::TopKBy::kValue);

// One segment: the k coordinates of [begin, begin + n).
absl::Status SelectTopKOnDevice(const float* statistic, int64_t n, int64_t begin, int64_t k,
                                int64_t* out_indices, void* scratch, size_t scratch_bytes,
                                cudaStream_t stream, host_device::TopKBy by = host_device::TopKBy::kValue);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_CUDA_H_
