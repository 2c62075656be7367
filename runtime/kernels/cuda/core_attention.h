#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_H_

// Bodies of core attention on the GPU (FlashAttention-2's recurrence), fp32,
// for the task format of runtime/kernels/core_attention.h: a query at
// document position p attends keys 0..p of its document.
//
// Forward, per (query row, head), over key blocks of kAttentionKeyBlock keys
// aligned at key 0:
//   s_j = scale·q·k_j;  m' = max(m, max_j s_j);  c = e^(m − m')
//   l ← c·l + Σ_j e^(s_j − m');  acc ← c·acc + Σ_j e^(s_j − m')·v_j;  m ← m'
//   o = acc / l;  lse = m + log l
// so the scores are never stored whole and acc is rescaled once per block.
//
// Backward, with P_ij = e^(s_ij − lse_i), dP_ij = dO_i·v_j and
// D_i = rowsum(dO_i ∘ O_i) = Σ_j P_ij dP_ij:
//   dS_ij = P_ij (dP_ij − D_i)
//   dQ_i = scale·Σ_j dS_ij k_j            (per query row, over key blocks)
//   dK_j = scale·Σ_i dS_ij q_i,  dV_j = Σ_i P_ij dO_i
//                                          (per key row, over query blocks)
// Each key row sums its queries in a fixed order (GQA group heads, then the
// tile's query segments, then their blocks), so dK/dV need no atomics and
// are bitwise reproducible.
//
// The launches (core_attention.cu) stage the same blocks in shared memory
// and call these bodies on them, so the CPU test of the bodies checks the
// device arithmetic up to the rounding of expf/logf.
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

inline constexpr int kAttentionKeyBlock = 32;    // keys per forward/dQ step
inline constexpr int kAttentionQueryBlock = 32;  // queries per dK/dV step
inline constexpr int kAttentionMaxHeadDim = 128;  // per-thread accumulators

// Head counts, head size and scale: AttentionShape without its includes.
struct AttentionDims {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float softmax_scale = 0.0f;
};

// Up to kAttentionQueryTile consecutive queries of one task: positions
// q_pos .. q_pos + n_queries − 1 at rows q_row .., attending the keys of
// their document (document position 0 at K/V row kv_row).
struct QueryTile {
  int64_t q_row = 0;
  int64_t q_pos = 0;
  int64_t kv_row = 0;
  int32_t n_queries = 0;
};

// Up to kAttentionKeyTile consecutive keys of one document, and the query
// segments (segments[first_segment .. first_segment + n_segments)) that
// attend them: each segment is a task's queries from max(q_begin, k_pos).
struct KeyTile {
  int64_t kv_row = 0;  // document position 0
  int64_t k_pos = 0;
  int32_t n_keys = 0;
  int32_t n_segments = 0;
  int64_t first_segment = 0;
};

struct QuerySegment {
  int64_t q_row = 0;  // row of the query at q_pos
  int64_t q_pos = 0;
  int64_t n_queries = 0;
};

inline constexpr int kAttentionQueryTile = 64;  // threads of forward and dQ blocks
inline constexpr int kAttentionKeyTile = 64;    // threads of dK/dV blocks

// A tile plan as the launches take it: the lists in device memory, the wave
// boundaries (see CoreAttentionTiles) in host memory.
struct CoreAttentionTilesView {
  AttentionDims dims;
  const QueryTile* query_tiles = nullptr;
  int64_t n_query_tiles = 0;
  const KeyTile* key_tiles = nullptr;
  const QuerySegment* segments = nullptr;
  const int64_t* wave_ends = nullptr;
  int64_t n_waves = 0;
};

CORESCAPE_HOST_DEVICE float AttentionDot(const float* a, const float* b, int n) {
  float sum = 0.0f;
  for (int c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// One FlashAttention-2 step: n_keys (≤ kAttentionKeyBlock) keys and values
// at row stride `stride`. running_max starts at −∞, running_sum and acc at 0.
CORESCAPE_HOST_DEVICE void AttentionForwardKeyBlock(const float* q_row, const float* k_block,
                                                    const float* v_block, int64_t stride, int n_keys,
                                                    int head_dim, float scale, float* acc,
                                                    float* running_max, float* running_sum) {
  float p[kAttentionKeyBlock];
  float block_max = -INFINITY;
  for (int j = 0; j < n_keys; ++j) {
    p[j] = scale * AttentionDot(q_row, k_block + j * stride, head_dim);
    block_max = fmaxf(block_max, p[j]);
  }
  const float new_max = fmaxf(*running_max, block_max);
  const float correction = expf(*running_max - new_max);  // 0 on the first block
  float block_sum = 0.0f;
  for (int j = 0; j < n_keys; ++j) {
    p[j] = expf(p[j] - new_max);
    block_sum += p[j];
  }
  *running_sum = *running_sum * correction + block_sum;
  for (int c = 0; c < head_dim; ++c) {
    float a = acc[c] * correction;
    for (int j = 0; j < n_keys; ++j) a += p[j] * v_block[j * stride + c];
    acc[c] = a;
  }
  *running_max = new_max;
}

CORESCAPE_HOST_DEVICE void AttentionForwardFinish(const float* acc, float running_max, float running_sum,
                                                  int head_dim, float* o_row, float* lse) {
  const float inverse = 1.0f / running_sum;
  for (int c = 0; c < head_dim; ++c) o_row[c] = acc[c] * inverse;
  *lse = running_max + logf(running_sum);
}

// The whole forward of one (query row, head) over keys 0..n_keys − 1 read
// in place (k, v at row stride `stride`), blocked as the launch blocks them.
CORESCAPE_HOST_DEVICE void AttentionForwardRow(const float* q_row, const float* k, const float* v,
                                               int64_t stride, int64_t n_keys, int head_dim, float scale,
                                               float* o_row, float* lse) {
  float acc[kAttentionMaxHeadDim];
  for (int c = 0; c < head_dim; ++c) acc[c] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int64_t j0 = 0; j0 < n_keys; j0 += kAttentionKeyBlock) {
    const int n = static_cast<int>(n_keys - j0 < kAttentionKeyBlock ? n_keys - j0 : kAttentionKeyBlock);
    AttentionForwardKeyBlock(q_row, k + j0 * stride, v + j0 * stride, stride, n, head_dim, scale, acc,
                             &running_max, &running_sum);
  }
  AttentionForwardFinish(acc, running_max, running_sum, head_dim, o_row, lse);
}

// D = rowsum(dO ∘ O) of one (query row, head).
CORESCAPE_HOST_DEVICE float AttentionOutputGradDot(const float* d_o_row, const float* o_row, int head_dim) {
  return AttentionDot(d_o_row, o_row, head_dim);
}

// acc += Σ_j dS_j k_j over one key block (dQ = scale·acc at the end).
CORESCAPE_HOST_DEVICE void AttentionDqKeyBlock(const float* q_row, const float* d_o_row, float lse, float delta,
                                               const float* k_block, const float* v_block, int64_t stride,
                                               int n_keys, int head_dim, float scale, float* acc) {
  for (int j = 0; j < n_keys; ++j) {
    const float* k_row = k_block + j * stride;
    const float p = expf(scale * AttentionDot(q_row, k_row, head_dim) - lse);
    const float d_s = p * (AttentionDot(d_o_row, v_block + j * stride, head_dim) - delta);
    for (int c = 0; c < head_dim; ++c) acc[c] += d_s * k_row[c];
  }
}

// dQ of one (query row, head) over keys 0..n_keys − 1 read in place;
// overwrites d_q_row.
CORESCAPE_HOST_DEVICE void AttentionDqRow(const float* q_row, const float* d_o_row, float lse, float delta,
                                          const float* k, const float* v, int64_t stride, int64_t n_keys,
                                          int head_dim, float scale, float* d_q_row) {
  float acc[kAttentionMaxHeadDim];
  for (int c = 0; c < head_dim; ++c) acc[c] = 0.0f;
  for (int64_t j0 = 0; j0 < n_keys; j0 += kAttentionKeyBlock) {
    const int n = static_cast<int>(n_keys - j0 < kAttentionKeyBlock ? n_keys - j0 : kAttentionKeyBlock);
    AttentionDqKeyBlock(q_row, d_o_row, lse, delta, k + j0 * stride, v + j0 * stride, stride, n, head_dim,
                        scale, acc);
  }
  for (int c = 0; c < head_dim; ++c) d_q_row[c] = scale * acc[c];
}

// d_k_acc += Σ_i dS_i q_i and d_v_acc += Σ_i P_i dO_i over one block of
// n_queries (≤ kAttentionQueryBlock) consecutive queries from position
// q_pos (q, d_o at row stride `stride`; lse, delta at `lse_stride`);
// queries before key_pos do not see the key and are skipped.
CORESCAPE_HOST_DEVICE void AttentionDkDvQueryBlock(const float* k_row, const float* v_row, int64_t key_pos,
                                                   const float* q_block, const float* d_o_block, int64_t stride,
                                                   const float* lse_block, const float* delta_block,
                                                   int64_t lse_stride, int64_t q_pos, int n_queries, int head_dim,
                                                   float scale, float* d_k_acc, float* d_v_acc) {
  for (int i = 0; i < n_queries; ++i) {
    if (q_pos + i < key_pos) continue;
    const float* q_row = q_block + i * stride;
    const float* d_o_row = d_o_block + i * stride;
    const float p = expf(scale * AttentionDot(q_row, k_row, head_dim) - lse_block[i * lse_stride]);
    const float d_s = p * (AttentionDot(d_o_row, v_row, head_dim) - delta_block[i * lse_stride]);
    for (int c = 0; c < head_dim; ++c) {
      d_v_acc[c] += p * d_o_row[c];
      d_k_acc[c] += d_s * q_row[c];
    }
  }
}

// dK, dV of key row key_pos of tile `tile` for kv head kv_head, reading
// everything in place, in the launch's order; ADDS to d_k_row, d_v_row.
// delta has lse's layout [q_rows, n_heads].
CORESCAPE_HOST_DEVICE void AttentionDkDvKeyRow(const AttentionDims& dims, const KeyTile& tile,
                                               const QuerySegment* segments, int kv_head, int64_t key_pos,
                                               const float* q, const float* k, const float* v, const float* lse,
                                               const float* delta, const float* d_o, float* d_k, float* d_v) {
  const int d = dims.head_dim;
  const int64_t q_stride = int64_t{dims.n_heads} * d;
  const int64_t kv_offset = ((tile.kv_row + key_pos) * dims.n_kv_heads + kv_head) * int64_t{d};
  const int group = dims.n_heads / dims.n_kv_heads;
  float d_k_acc[kAttentionMaxHeadDim], d_v_acc[kAttentionMaxHeadDim];
  for (int c = 0; c < d; ++c) d_k_acc[c] = d_v_acc[c] = 0.0f;
  for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    for (int64_t s = tile.first_segment; s < tile.first_segment + tile.n_segments; ++s) {
      const QuerySegment& segment = segments[s];
      for (int64_t i0 = 0; i0 < segment.n_queries; i0 += kAttentionQueryBlock) {
        const int n = static_cast<int>(segment.n_queries - i0 < kAttentionQueryBlock ? segment.n_queries - i0
                                                                                     : kAttentionQueryBlock);
        const int64_t row = segment.q_row + i0;
        AttentionDkDvQueryBlock(k + kv_offset, v + kv_offset, key_pos, q + row * q_stride + head * d,
                                d_o + row * q_stride + head * d, q_stride, lse + row * dims.n_heads + head,
                                delta + row * dims.n_heads + head, dims.n_heads, segment.q_pos + i0, n, d,
                                dims.softmax_scale, d_k_acc, d_v_acc);
      }
    }
  }
  for (int c = 0; c < d; ++c) {
    d_k[kv_offset + c] += dims.softmax_scale * d_k_acc[c];
    d_v[kv_offset + c] += d_v_acc[c];
  }
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_H_
