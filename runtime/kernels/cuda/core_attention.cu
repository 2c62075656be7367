#include "runtime/kernels/cuda/core_attention.h"
#include "runtime/kernels/cuda/core_attention_cuda.h"
#include "runtime/kernels/cuda/core_attention_launch.cuh"

namespace corescape::kernels::cuda {
namespace {

// rows [row0, row0 + n) of a [rows, heads, head_dim] tensor, one head, into
// a dense [n, head_dim] shared tile.
__device__ void StageRows(const float* src, int64_t row0, int n, int64_t row_stride, int64_t head_offset, int head_dim,
                          float* dst) {
  for (int idx = threadIdx.x; idx < n * head_dim; idx += blockDim.x) {
    const int r = idx / head_dim, c = idx - r * head_dim;
    dst[idx] = src[(row0 + r) * row_stride + head_offset + c];
  }
}

__global__ void ForwardKernel(AttentionDims dims, const QueryTile* tiles, const float* q, const float* k,
                              const float* v, float* o, float* lse) {
  __shared__ float k_block[kAttentionKeyBlock * kAttentionMaxHeadDim];
  __shared__ float v_block[kAttentionKeyBlock * kAttentionMaxHeadDim];
  const auto [tile, head, kv_head, d, q_stride, kv_stride] = ThisQueryTileBlock(dims, tiles);
  const int i = threadIdx.x;
  const bool active = i < tile.n_queries;
  const int64_t row = tile.q_row + i;
  const int64_t n_keys = tile.q_pos + i + 1;
  float q_row[kAttentionMaxHeadDim], acc[kAttentionMaxHeadDim];
  for (int c = 0; c < d; ++c) {
    q_row[c] = active ? q[row * q_stride + head * d + c] : 0.0f;
    acc[c] = 0.0f;
  }
  float running_max = -INFINITY, running_sum = 0.0f;
  const int64_t tile_keys = tile.q_pos + tile.n_queries;
  for (int64_t j0 = 0; j0 < tile_keys; j0 += kAttentionKeyBlock) {
    const int staged = static_cast<int>(tile_keys - j0 < kAttentionKeyBlock ? tile_keys - j0 : kAttentionKeyBlock);
    StageRows(k, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, k_block);
    StageRows(v, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, v_block);
    __syncthreads();
    if (active && j0 < n_keys) {
      const int n = static_cast<int>(n_keys - j0 < kAttentionKeyBlock ? n_keys - j0 : kAttentionKeyBlock);
      AttentionForwardKeyBlock(q_row, k_block, v_block, d, n, d, dims.softmax_scale, acc, &running_max, &running_sum);
    }
    __syncthreads();
  }
  if (active) {
    AttentionForwardFinish(acc, running_max, running_sum, d, o + row * q_stride + head * d,
                           lse + row * dims.n_heads + head);
  }
}

__global__ void DqKernel(AttentionDims dims, const QueryTile* tiles, const float* q, const float* k, const float* v,
                         const float* o, const float* lse, const float* d_o, float* delta, float* d_q) {
  __shared__ float k_block[kAttentionKeyBlock * kAttentionMaxHeadDim];
  __shared__ float v_block[kAttentionKeyBlock * kAttentionMaxHeadDim];
  const auto [tile, head, kv_head, d, q_stride, kv_stride] = ThisQueryTileBlock(dims, tiles);
  const int i = threadIdx.x;
  const bool active = i < tile.n_queries;
  const int64_t row = tile.q_row + i;
  const int64_t n_keys = tile.q_pos + i + 1;
  float q_row[kAttentionMaxHeadDim], d_o_row[kAttentionMaxHeadDim], acc[kAttentionMaxHeadDim];
  float row_lse = 0.0f, row_delta = 0.0f;
  if (active) {
    for (int c = 0; c < d; ++c) {
      q_row[c] = q[row * q_stride + head * d + c];
      d_o_row[c] = d_o[row * q_stride + head * d + c];
      acc[c] = 0.0f;
    }
    row_delta = AttentionOutputGradDot(d_o_row, o + row * q_stride + head * d, d);
    delta[row * dims.n_heads + head] = row_delta;
    row_lse = lse[row * dims.n_heads + head];
  }
  const int64_t tile_keys = tile.q_pos + tile.n_queries;
  for (int64_t j0 = 0; j0 < tile_keys; j0 += kAttentionKeyBlock) {
    const int staged = static_cast<int>(tile_keys - j0 < kAttentionKeyBlock ? tile_keys - j0 : kAttentionKeyBlock);
    StageRows(k, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, k_block);
    StageRows(v, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, v_block);
    __syncthreads();
    if (active && j0 < n_keys) {
      const int n = static_cast<int>(n_keys - j0 < kAttentionKeyBlock ? n_keys - j0 : kAttentionKeyBlock);
      AttentionDqKeyBlock(q_row, d_o_row, row_lse, row_delta, k_block, v_block, d, n, d, dims.softmax_scale, acc);
    }
    __syncthreads();
  }
  if (active) {
    for (int c = 0; c < d; ++c) d_q[row * q_stride + head * d + c] = dims.softmax_scale * acc[c];
  }
}

// The order of AttentionDkDvKeyRow: group heads, segments, query blocks.
__global__ void DkDvKernel(AttentionDims dims, const KeyTile* tiles, const QuerySegment* segments, const float* q,
                           const float* k, const float* v, const float* lse, const float* delta, const float* d_o,
                           float* d_k, float* d_v) {
  __shared__ float q_block[kAttentionQueryBlock * kAttentionMaxHeadDim];
  __shared__ float d_o_block[kAttentionQueryBlock * kAttentionMaxHeadDim];
  __shared__ float lse_block[kAttentionQueryBlock];
  __shared__ float delta_block[kAttentionQueryBlock];
  const KeyTile tile = tiles[blockIdx.x];
  const int kv_head = blockIdx.y, d = dims.head_dim;
  const int group = dims.n_heads / dims.n_kv_heads;
  const int64_t q_stride = int64_t{dims.n_heads} * d;
  const int j = threadIdx.x;
  const bool active = j < tile.n_keys;
  const int64_t key_pos = tile.k_pos + j;
  const int64_t kv_offset = ((tile.kv_row + key_pos) * dims.n_kv_heads + kv_head) * int64_t{d};
  float k_row[kAttentionMaxHeadDim], v_row[kAttentionMaxHeadDim];
  float d_k_acc[kAttentionMaxHeadDim], d_v_acc[kAttentionMaxHeadDim];
  for (int c = 0; c < d; ++c) {
    k_row[c] = active ? k[kv_offset + c] : 0.0f;
    v_row[c] = active ? v[kv_offset + c] : 0.0f;
    d_k_acc[c] = d_v_acc[c] = 0.0f;
  }
  for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    for (int64_t s = tile.first_segment; s < tile.first_segment + tile.n_segments; ++s) {
      const QuerySegment segment = segments[s];
      for (int64_t i0 = 0; i0 < segment.n_queries; i0 += kAttentionQueryBlock) {
        const int n = static_cast<int>(segment.n_queries - i0 < kAttentionQueryBlock ? segment.n_queries - i0
                                                                                     : kAttentionQueryBlock);
        const int64_t row0 = segment.q_row + i0;
        StageRows(q, row0, n, q_stride, int64_t{head} * d, d, q_block);
        StageRows(d_o, row0, n, q_stride, int64_t{head} * d, d, d_o_block);
        for (int r = threadIdx.x; r < n; r += blockDim.x) {
          lse_block[r] = lse[(row0 + r) * dims.n_heads + head];
          delta_block[r] = delta[(row0 + r) * dims.n_heads + head];
        }
        __syncthreads();
        if (active) {
          AttentionDkDvQueryBlock(k_row, v_row, key_pos, q_block, d_o_block, d, lse_block, delta_block, 1,
                                  segment.q_pos + i0, n, d, dims.softmax_scale, d_k_acc, d_v_acc);
        }
        __syncthreads();
      }
    }
  }
  if (active) {
    for (int c = 0; c < d; ++c) {
      d_k[kv_offset + c] += dims.softmax_scale * d_k_acc[c];
      d_v[kv_offset + c] += d_v_acc[c];
    }
  }
}

}  // namespace

absl::Status LaunchCoreAttentionForward(const CoreAttentionTilesView& tiles, const float* q, const float* k,
                                        const float* v, float* o, float* lse, cudaStream_t stream) {
  if (tiles.n_query_tiles == 0) return absl::OkStatus();
  ForwardKernel<<<QueryGrid(tiles), kAttentionQueryTile, 0, stream>>>(tiles.dims, tiles.query_tiles, q, k, v, o, lse);
  return LaunchStatus("LaunchCoreAttentionForward");
}

absl::Status LaunchCoreAttentionBackward(const CoreAttentionTilesView& tiles, const float* q, const float* k,
                                         const float* v, const float* o, const float* lse, const float* d_o,
                                         float* delta, float* d_q, float* d_k, float* d_v, cudaStream_t stream) {
  constexpr const char* kLaunch = "LaunchCoreAttentionBackward";
  if (tiles.n_query_tiles == 0) return absl::OkStatus();
  DqKernel<<<QueryGrid(tiles), kAttentionQueryTile, 0, stream>>>(tiles.dims, tiles.query_tiles, q, k, v, o, lse, d_o,
                                                                 delta, d_q);
  if (absl::Status s = LaunchStatus(kLaunch); !s.ok()) return s;
  return ForEachKeyWave(tiles, kLaunch, [&](const KeyTile* wave, dim3 grid) {
    DkDvKernel<<<grid, kAttentionKeyTile, 0, stream>>>(tiles.dims, wave, tiles.segments, q, k, v, lse, delta, d_o, d_k,
                                                       d_v);
  });
}

}  // namespace corescape::kernels::cuda
