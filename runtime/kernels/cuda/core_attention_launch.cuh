#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_LAUNCH_CUH_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_LAUNCH_CUH_

// How both core-attention launch files (fp32 and tensor-core) walk a tile
// plan (nvcc only): one block per (query tile, head), and the key tiles
// wave by wave.
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/kernels/cuda/core_attention.h"
#include "runtime/kernels/cuda/launch_util.cuh"

namespace corescape::kernels::cuda {

inline dim3 QueryGrid(const CoreAttentionTilesView& tiles) {
  return dim3(static_cast<unsigned>(tiles.n_query_tiles), static_cast<unsigned>(tiles.dims.n_heads));
}

// What a block of a QueryGrid launch works on: its tile and head, the head's
// kv head (GQA), and the row strides of the query and key/value tensors.
struct QueryTileBlock {
  QueryTile tile;
  int head, kv_head, d;
  int64_t q_stride, kv_stride;
};

__device__ inline QueryTileBlock ThisQueryTileBlock(const AttentionDims& dims, const QueryTile* tiles) {
  const int head = blockIdx.y;
  return {tiles[blockIdx.x], head, head / (dims.n_heads / dims.n_kv_heads), dims.head_dim,
          int64_t{dims.n_heads} * dims.head_dim, int64_t{dims.n_kv_heads} * dims.head_dim};
}

// launch_wave(first key tile, grid) once per non-empty wave, in order (a
// wave's tiles write disjoint rows; later waves add to what earlier ones
// wrote, so they must run after them, as one stream runs them).
template <typename LaunchWave>
absl::Status ForEachKeyWave(const CoreAttentionTilesView& tiles, const char* launch, LaunchWave launch_wave) {
  int64_t begin = 0;
  for (int64_t w = 0; w < tiles.n_waves; ++w) {
    const int64_t end = tiles.wave_ends[w];
    if (end > begin) {
      launch_wave(tiles.key_tiles + begin,
                  dim3(static_cast<unsigned>(end - begin), static_cast<unsigned>(tiles.dims.n_kv_heads)));
      if (absl::Status s = LaunchStatus(launch); !s.ok()) return s;
    }
    begin = end;
  }
  return absl::OkStatus();
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_LAUNCH_CUH_
