#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_MMA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_MMA_H_

// Bodies of core attention on tensor cores (bf16 in, fp32 accumulate), for
// the tile plans of core_attention_tiles.h and the recurrences of
// core_attention.h.
//
// A block of kMmaWarps warps owns one 64-row tile (queries for forward and
// dQ, keys for dK/dV) and walks 64-column blocks of the other side. Every
// product of two tiles (QKᵀ, dO·Vᵀ, P·V, dS·K, Pᵀ·dO, dSᵀ·Q) is a 16×16×16
// bf16 MMA with fp32 accumulation; a warp computes the 16 rows it owns and
// leaves the scores in shared memory, where two lanes per row (each
// kMmaColsPerLane columns) run the bodies below on them: the causal mask,
// the exponentials and the softmax bookkeeping. P and dS are rounded to
// bf16 for the next MMA, as FlashAttention-2 does; everything else stays
// fp32. Every output accumulator (O, dQ, dK, dV) stays in registers, and
// so does the backward's dP (turned into dS element by element); the
// forward's per-row rescale and that step find each fragment element's row
// and column once per block (a WMMA fragment's layout is fixed but
// unspecified).
//
// Each lane works on columns [c0, c0 + n) of its row; the two halves of a
// row are combined with fmaxf (maxima) and + (sums), which give the same
// bits in either order. core_attention_mma_host.h runs the launches'
// algorithm on the host with these bodies.
#include "runtime/kernels/cuda/casts.h"
#include "runtime/kernels/cuda/core_attention.h"
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

inline constexpr int kMmaTileRows = 64;   // rows a block owns
inline constexpr int kMmaBlockCols = 64;  // columns per step
inline constexpr int kMmaWarps = 4;
inline constexpr int kMmaWarpRows = kMmaTileRows / kMmaWarps;  // 16: one MMA tall
inline constexpr int kMmaColsPerLane = kMmaBlockCols / 2;
static_assert(kMmaTileRows == kAttentionQueryTile && kMmaTileRows == kAttentionKeyTile,
              "the MMA launches walk the same tile plans as the fp32 ones");
static_assert(kMmaWarpRows * 2 == 32, "two lanes per row fill a warp");

// Head sizes are padded with zero columns to one of these (multiples of
// the MMA's 16; zero columns add nothing to a dot product). 96 is
// llama-500m's.
CORESCAPE_HOST_DEVICE int MmaPaddedHeadDim(int head_dim) {
  return head_dim <= 32 ? 32 : (head_dim <= 64 ? 64 : (head_dim <= 96 ? 96 : 128));
}

// Forward, step 1: the largest scale·s_c over columns [c0, c0 + n) (keys
// k_pos0 + c) that the query at q_pos sees (key ≤ query); −∞ if none.
CORESCAPE_HOST_DEVICE float MmaScoreMax(const float* s_row, int c0, int n, float scale, int64_t q_pos,
                                        int64_t k_pos0) {
  float block_max = -INFINITY;
  for (int c = c0; c < c0 + n; ++c) {
    if (k_pos0 + c <= q_pos) block_max = fmaxf(block_max, scale * s_row[c]);
  }
  return block_max;
}

// Forward, step 2: raises the running maximum to include the block's and
// returns e^(old − new), the factor that rescales the running sum and the
// output accumulator (0 before the first key, when both are 0).
CORESCAPE_HOST_DEVICE float MmaRaiseMax(float block_max, float* running_max) {
  const float old_max = *running_max;
  const float new_max = fmaxf(old_max, block_max);
  *running_max = new_max;
  return old_max == -INFINITY ? 0.0f : expf(old_max - new_max);
}

// Forward, step 3: p_c = e^(scale·s_c − row_max) for the keys the query
// sees and 0 for the others, into p_row[c] as bf16; returns Σ p_c over the
// rounded values, so the normalizer sums exactly the weights P·V uses.
CORESCAPE_HOST_DEVICE float MmaExpScores(const float* s_row, int c0, int n, float scale, int64_t q_pos,
                                         int64_t k_pos0, float row_max, uint16_t* p_row) {
  float sum = 0.0f;
  for (int c = c0; c < c0 + n; ++c) {
    const float p = k_pos0 + c <= q_pos ? expf(scale * s_row[c] - row_max) : 0.0f;
    const uint16_t rounded = Bf16FromFloat(p);
    p_row[c] = rounded;
    sum += FloatFromBf16(rounded);
  }
  return sum;
}

// D = rowsum(dO ∘ O) of one (query row, head), with dO as the MMAs see it.
CORESCAPE_HOST_DEVICE float MmaOutputGradDot(const uint16_t* d_o_row, const float* o_row, int head_dim) {
  float sum = 0.0f;
  for (int c = 0; c < head_dim; ++c) sum += FloatFromBf16(d_o_row[c]) * o_row[c];
  return sum;
}

// dQ step, one query row (the query at q_pos): P_c = e^(scale·s_c − lse)
// for the keys k_pos0 + c it sees, 0 for the others, replaces s_c in place
// (fp32, for dS = P (dP − D) by MmaGradScore; dQ = scale·Σ_c dS_c k_c).
CORESCAPE_HOST_DEVICE void MmaQueryRowProbabilities(float* s_row, int c0, int n, float scale, float lse,
                                                    int64_t q_pos, int64_t k_pos0) {
  for (int c = c0; c < c0 + n; ++c) s_row[c] = k_pos0 + c <= q_pos ? expf(scale * s_row[c] - lse) : 0.0f;
}

// dK/dV step, one key row (key at key_pos) against the block's queries:
// column c is the query at q_pos0 + c with lse[c], for c < n_queries.
// Pᵀ_c = e^(scale·s_c − lse[c]) replaces s_c in place (fp32, for dS) and
// goes to p_row[c] as bf16 (for dV = Σ_c P_c dO_c); 0 for queries that do
// not see the key or are past the block's end.
CORESCAPE_HOST_DEVICE void MmaKeyRowProbabilities(float* s_row, int c0, int n, float scale, const float* lse,
                                                  int n_queries, int64_t q_pos0, int64_t key_pos,
                                                  uint16_t* p_row) {
  for (int c = c0; c < c0 + n; ++c) {
    const float p = c < n_queries && q_pos0 + c >= key_pos ? expf(scale * s_row[c] - lse[c]) : 0.0f;
    s_row[c] = p;
    p_row[c] = Bf16FromFloat(p);
  }
}

// dS = P (dP − D) of one (key, query) pair (dK = scale·Σ_c dS_c q_c); 0
// where P is.
CORESCAPE_HOST_DEVICE float MmaGradScore(float p, float d_p, float delta) { return p * (d_p - delta); }

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_MMA_H_
