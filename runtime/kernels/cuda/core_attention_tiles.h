#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_TILES_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_TILES_H_

// The work lists the core-attention launches walk, built on the host from a
// validated task list: query tiles (forward, dQ) and key tiles with their
// query segments (dK/dV). Host only.
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
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

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_TILES_H_
