#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_TILES_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_TILES_H_

// The work lists the core-attention launches walk, built on the host from a
// validated task list: query tiles (forward, dQ) and key tiles with their
// query segments (dK/dV), and their upload to a device.
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/device/device_runtime.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cuda/core_attention.h"

namespace corescape::kernels::cuda {

struct CoreAttentionTiles {
  AttentionDims dims;
  // Longest key range first, so the costly tiles start early.
  std::vector<QueryTile> query_tiles;
  // Key tiles in waves: tiles of one wave write disjoint d_k/d_v rows, so a
  // wave runs as one launch without atomics. Wave w is key_tiles
  // [wave_ends[w − 1], wave_ends[w]) (from 0 for w = 0). Documents given
  // distinct kv_row values whose rows overlap land in different waves.
  std::vector<KeyTile> key_tiles;
  std::vector<int64_t> wave_ends;
  std::vector<QuerySegment> segments;
};

// Validates as ValidateAttentionArgs does, plus head_dim ≤
// kAttentionMaxHeadDim and grid limits, naming the problem.
absl::StatusOr<CoreAttentionTiles> PlanCoreAttentionTiles(const AttentionShape& shape,
                                                          absl::Span<const AttentionTask> tasks, int64_t q_rows,
                                                          int64_t kv_rows);

// A plan's lists in device memory of the allocator's runtime (on the CPU
// runtime that is host memory, so the CPU tests read the same view).
struct UploadedCoreAttentionTiles {
  AttentionDims dims;
  device::DeviceBuffer query_tiles, key_tiles, segments;
  int64_t n_query_tiles = 0;
  std::vector<int64_t> wave_ends;

  // Valid while this object lives and is not moved.
  CoreAttentionTilesView view() const;
};

// Copies the lists in `stream` order and waits for the copies, so `tiles`
// may go away at once.
absl::StatusOr<UploadedCoreAttentionTiles> UploadCoreAttentionTiles(const CoreAttentionTiles& tiles,
                                                                    device::CachingAllocator& allocator,
                                                                    device::Stream& stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_TILES_H_
