// Core attention on tensor cores: the bf16 launches of core_attention_cuda.h.
// The algorithm and its bodies are in core_attention_mma.h; the host runs
// the same steps in core_attention_mma_host.cc.
#include <cuda_bf16.h>
#include <mma.h>

#include <climits>
#include <cstdint>

#include "runtime/kernels/cuda/core_attention_cuda.h"
#include "runtime/kernels/cuda/core_attention_launch.cuh"
#include "runtime/kernels/cuda/core_attention_mma.h"

namespace corescape::kernels::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using Bf16 = __nv_bfloat16;

constexpr int kThreadsPerBlock = kMmaWarps * 32;
constexpr int kFragment = 16;                      // the MMA's m = n = k
constexpr int kScoreStride = kMmaBlockCols + 4;    // fp32 score rows (skewed across banks)
constexpr int kWeightStride = kMmaBlockCols + 8;   // bf16 P / dS rows
constexpr unsigned kFullWarp = 0xffffffffu;

using FragmentA = wmma::fragment<wmma::matrix_a, kFragment, kFragment, kFragment, Bf16, wmma::row_major>;
// B read from a row-major tile as its transpose: B[k][n] = tile[n][k].
using FragmentBTransposed = wmma::fragment<wmma::matrix_b, kFragment, kFragment, kFragment, Bf16, wmma::col_major>;
using FragmentB = wmma::fragment<wmma::matrix_b, kFragment, kFragment, kFragment, Bf16, wmma::row_major>;
using Accumulator = wmma::fragment<wmma::accumulator, kFragment, kFragment, kFragment, float>;

// Shared-memory shapes for head size kWidth (padded). Every region's size
// is a multiple of 128 bytes, so each starts aligned as the MMA loads need.
template <int kWidth>
struct Layout {
  static constexpr int kInputStride = kWidth + 8;  // bf16 rows of a staged tile
  static constexpr int kAccStride = kWidth + 4;    // fp32 accumulator rows
  static constexpr size_t kInputBytes = size_t{kMmaTileRows} * kInputStride * sizeof(Bf16);
  static constexpr size_t kScoreBytes = size_t{kMmaTileRows} * kScoreStride * sizeof(float);
  static constexpr size_t kWeightBytes = size_t{kMmaTileRows} * kWeightStride * sizeof(Bf16);
  static constexpr size_t kAccBytes = size_t{kMmaTileRows} * kAccStride * sizeof(float);
  static constexpr size_t kRowBytes = size_t{kMmaTileRows} * sizeof(float);
  // Two adjacent input tiles hold a tile of fp32 accumulator rows (the
  // outputs' staging once the loop is done with them).
  static_assert(2 * kInputBytes >= kAccBytes);

  static constexpr size_t kForwardBytes = 3 * kInputBytes + kScoreBytes + kWeightBytes;
  static constexpr size_t kDqBytes = 4 * kInputBytes + kScoreBytes + kWeightBytes;
  static constexpr size_t kDkDvBytes = 4 * kInputBytes + kScoreBytes + 2 * kWeightBytes + 2 * kRowBytes;
};

extern __shared__ __align__(128) unsigned char mma_shared[];

// Hands out consecutive regions of the block's dynamic shared memory.
struct SharedRegions {
  unsigned char* next = mma_shared;
  template <typename T>
  __device__ T* Take(size_t bytes) {
    T* region = reinterpret_cast<T*>(next);
    next += bytes;
    return region;
  }
};

// Rows [row0, row0 + n) of one head of a [rows, heads·head_dim] bf16 tensor
// into a kMmaTileRows × kWidth tile, zero past n rows and head_dim columns.
// `vectorized`: head_dim is a multiple of 8 and the tensor 16-byte aligned,
// so rows move as 16-byte chunks.
template <int kWidth>
__device__ void StageTile(const uint16_t* src, int64_t row0, int n, int64_t row_stride, int64_t head_offset,
                          int head_dim, bool vectorized, uint16_t* dst) {
  constexpr int kStride = Layout<kWidth>::kInputStride;
  if (vectorized) {
    constexpr int kChunks = kWidth / 8;
    for (int idx = threadIdx.x; idx < kMmaTileRows * kChunks; idx += blockDim.x) {
      const int r = idx / kChunks, c = (idx % kChunks) * 8;
      uint4 chunk = make_uint4(0, 0, 0, 0);
      if (r < n && c < head_dim) chunk = *reinterpret_cast<const uint4*>(src + (row0 + r) * row_stride + head_offset + c);
      *reinterpret_cast<uint4*>(dst + r * kStride + c) = chunk;
    }
  } else {
    for (int idx = threadIdx.x; idx < kMmaTileRows * kWidth; idx += blockDim.x) {
      const int r = idx / kWidth, c = idx % kWidth;
      dst[r * kStride + c] = r < n && c < head_dim ? src[(row0 + r) * row_stride + head_offset + c] : uint16_t{0};
    }
  }
}

// This warp's 16 rows of a·bᵀ (a_rows: 16 × kWidth, b: kMmaBlockCols ×
// kWidth, both staged tiles), one 16-column fragment at a time, each handed
// to finish(nf, fragment) (columns nf·16 ..).
template <int kWidth, typename Finish>
__device__ void WarpProducts(const uint16_t* a_rows, const uint16_t* b, Finish finish) {
  constexpr int kStride = Layout<kWidth>::kInputStride;
  FragmentA a[kWidth / kFragment];
#pragma unroll
  for (int kk = 0; kk < kWidth / kFragment; ++kk) {
    wmma::load_matrix_sync(a[kk], reinterpret_cast<const Bf16*>(a_rows) + kk * kFragment, kStride);
  }
#pragma unroll
  for (int nf = 0; nf < kMmaBlockCols / kFragment; ++nf) {
    Accumulator acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int kk = 0; kk < kWidth / kFragment; ++kk) {
      FragmentBTransposed b_fragment;
      wmma::load_matrix_sync(b_fragment, reinterpret_cast<const Bf16*>(b) + nf * kFragment * kStride + kk * kFragment,
                             kStride);
      wmma::mma_sync(acc, a[kk], b_fragment, acc);
    }
    finish(nf, acc);
  }
}

// The scores a_rows·bᵀ into `out` (16 × kMmaBlockCols, fp32).
template <int kWidth>
__device__ void WarpScores(const uint16_t* a_rows, const uint16_t* b, float* out) {
  WarpProducts<kWidth>(a_rows, b, [out](int nf, const Accumulator& acc) {
    wmma::store_matrix_sync(out + nf * kFragment, acc, kScoreStride, wmma::mem_row_major);
  });
}

// acc (this warp's 16 rows × kWidth) += weights (16 × kMmaBlockCols, bf16)
// · b (a staged kMmaBlockCols × kWidth tile).
template <int kWidth>
__device__ void WarpAccumulate(const uint16_t* weight_rows, const uint16_t* b, Accumulator (&acc)[kWidth / kFragment]) {
  constexpr int kStride = Layout<kWidth>::kInputStride;
  FragmentA w[kMmaBlockCols / kFragment];
#pragma unroll
  for (int kk = 0; kk < kMmaBlockCols / kFragment; ++kk) {
    wmma::load_matrix_sync(w[kk], reinterpret_cast<const Bf16*>(weight_rows) + kk * kFragment, kWeightStride);
  }
#pragma unroll
  for (int nf = 0; nf < kWidth / kFragment; ++nf) {
#pragma unroll
    for (int kk = 0; kk < kMmaBlockCols / kFragment; ++kk) {
      FragmentB b_fragment;
      wmma::load_matrix_sync(b_fragment, reinterpret_cast<const Bf16*>(b) + kk * kFragment * kStride + nf * kFragment,
                             kStride);
      wmma::mma_sync(acc[nf], w[kk], b_fragment, acc[nf]);
    }
  }
}

// This warp's dS rows: dP = a_rows (16 × kWidth) · bᵀ kept in registers,
// each element turned into dS = P (dP − D) (P: fp32 at p_rows, row stride
// kScoreStride; D: delta_at(e, column)) and stored as bf16 at ds_rows.
// `rows`, `cols`: the fragment elements' coordinates
// (AccumulatorCoordinate).
template <int kWidth, typename DeltaAt>
__device__ void WarpGradScores(const uint16_t* a_rows, const uint16_t* b, const float* p_rows, DeltaAt delta_at,
                               const int (&rows)[Accumulator::num_elements],
                               const int (&cols)[Accumulator::num_elements], uint16_t* ds_rows) {
  WarpProducts<kWidth>(a_rows, b, [&](int nf, const Accumulator& d_p) {
#pragma unroll
    for (int e = 0; e < Accumulator::num_elements; ++e) {
      const int c = nf * kFragment + cols[e];
      ds_rows[rows[e] * kWeightStride + c] =
          Bf16FromFloat(MmaGradScore(p_rows[rows[e] * kScoreStride + c], d_p.x[e], delta_at(e, c)));
    }
  });
}

template <int kWidth>
__device__ void ZeroAccumulators(Accumulator (&acc)[kWidth / kFragment]) {
#pragma unroll
  for (int nf = 0; nf < kWidth / kFragment; ++nf) wmma::fill_fragment(acc[nf], 0.0f);
}

// Stores this warp's accumulators, times `factor`, as fp32 rows at
// out_rows (row stride Layout::kAccStride).
template <int kWidth>
__device__ void StoreAccumulators(Accumulator (&acc)[kWidth / kFragment], float factor, float* out_rows) {
#pragma unroll
  for (int nf = 0; nf < kWidth / kFragment; ++nf) {
    for (int e = 0; e < acc[nf].num_elements; ++e) acc[nf].x[e] *= factor;
    wmma::store_matrix_sync(out_rows + nf * kFragment, acc[nf], Layout<kWidth>::kAccStride, wmma::mem_row_major);
  }
}

// Where each element of this lane's accumulator fragments sits in the
// 16 × 16 tile (row 0..15, column 0..15). The layout is fixed but
// unspecified, so it is read once: a tile whose entries are their row
// numbers (then their column numbers) is written to `scratch` (row stride
// `stride`, this warp's own) and loaded as an accumulator.
__device__ __forceinline__ void AccumulatorCoordinate(float* scratch, int stride, bool columns,
                                                      int (&coordinate)[Accumulator::num_elements]) {
  for (int i = threadIdx.x % 32; i < kFragment * kFragment; i += 32) {
    scratch[(i / kFragment) * stride + i % kFragment] = static_cast<float>(columns ? i % kFragment : i / kFragment);
  }
  __syncwarp();
  Accumulator probe;
  wmma::load_matrix_sync(probe, scratch, stride, wmma::mem_row_major);
#pragma unroll
  for (int e = 0; e < Accumulator::num_elements; ++e) coordinate[e] = static_cast<int>(probe.x[e]);
  __syncwarp();
}

__device__ __forceinline__ void AccumulatorRows(float* scratch, int stride, int (&rows)[Accumulator::num_elements]) {
  AccumulatorCoordinate(scratch, stride, /*columns=*/false, rows);
}

// The lane pair of a row: which row of the tile, and which half of the
// columns (of a score block, or of a head) this lane takes.
struct LaneRow {
  int warp, lane, row, half;
  __device__ LaneRow()
      : warp(threadIdx.x / 32), lane(threadIdx.x % 32), row(warp * kMmaWarpRows + lane / 2), half(lane % 2) {}
  __device__ int score_begin() const { return half * kMmaColsPerLane; }
  // [begin, end) of n columns.
  __device__ int begin(int n) const { return half == 0 ? 0 : n / 2; }
  __device__ int end(int n) const { return half == 0 ? n / 2 : n; }
};

// The output accumulator stays in registers across key blocks: the online
// rescale multiplies each element by its row's correction, found through
// AccumulatorRows and fetched from the row's lanes by shuffle.
template <int kWidth>
__global__ void __launch_bounds__(kThreadsPerBlock)
    ForwardMmaKernel(AttentionDims dims, const QueryTile* tiles, const uint16_t* q, const uint16_t* k,
                     const uint16_t* v, bool vectorized, float* o, float* lse) {
  using L = Layout<kWidth>;
  SharedRegions shared;
  uint16_t* q_s = shared.Take<uint16_t>(L::kInputBytes);
  uint16_t* k_s = shared.Take<uint16_t>(L::kInputBytes);
  uint16_t* v_s = shared.Take<uint16_t>(L::kInputBytes);  // right after k_s: together the output staging
  float* s_s = shared.Take<float>(L::kScoreBytes);
  uint16_t* p_s = shared.Take<uint16_t>(L::kWeightBytes);

  const auto [tile, head, kv_head, d, q_stride, kv_stride] = ThisQueryTileBlock(dims, tiles);
  const LaneRow me;
  const int64_t q_pos = tile.q_pos + me.row;
  const int warp_rows = me.warp * kMmaWarpRows;
  float* s_row = s_s + me.row * kScoreStride;
  uint16_t* p_row = p_s + me.row * kWeightStride;

  int element_rows[Accumulator::num_elements];
  AccumulatorRows(s_s + warp_rows * kScoreStride, kScoreStride, element_rows);
  StageTile<kWidth>(q, tile.q_row, tile.n_queries, q_stride, int64_t{head} * d, d, vectorized, q_s);
  Accumulator acc[kWidth / kFragment];
  ZeroAccumulators<kWidth>(acc);
  // Both lanes of a row keep the same running maximum and sum.
  float running_max = -INFINITY, running_sum = 0.0f;
  const int64_t tile_keys = tile.q_pos + tile.n_queries;
  for (int64_t j0 = 0; j0 < tile_keys; j0 += kMmaBlockCols) {
    const int staged = static_cast<int>(tile_keys - j0 < kMmaBlockCols ? tile_keys - j0 : kMmaBlockCols);
    StageTile<kWidth>(k, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, vectorized, k_s);
    StageTile<kWidth>(v, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, vectorized, v_s);
    __syncthreads();
    WarpScores<kWidth>(q_s + warp_rows * L::kInputStride, k_s, s_s + warp_rows * kScoreStride);
    __syncwarp();
    float block_max = MmaScoreMax(s_row, me.score_begin(), kMmaColsPerLane, dims.softmax_scale, q_pos, j0);
    block_max = fmaxf(block_max, __shfl_xor_sync(kFullWarp, block_max, 1));
    const float correction = MmaRaiseMax(block_max, &running_max);
    float sum = MmaExpScores(s_row, me.score_begin(), kMmaColsPerLane, dims.softmax_scale, q_pos, j0, running_max,
                             p_row);
    sum += __shfl_xor_sync(kFullWarp, sum, 1);
    running_sum = running_sum * correction + sum;
    // Row r's lanes are 2r and 2r + 1 of the warp.
    float element_correction[Accumulator::num_elements];
#pragma unroll
    for (int e = 0; e < Accumulator::num_elements; ++e) {
      element_correction[e] = __shfl_sync(kFullWarp, correction, 2 * element_rows[e]);
    }
#pragma unroll
    for (int nf = 0; nf < kWidth / kFragment; ++nf) {
#pragma unroll
      for (int e = 0; e < Accumulator::num_elements; ++e) acc[nf].x[e] *= element_correction[e];
    }
    __syncwarp();  // the lanes' P rows are written
    WarpAccumulate<kWidth>(p_s + warp_rows * kWeightStride, v_s, acc);
    __syncthreads();  // K and V are restaged next
  }
  float* out_s = reinterpret_cast<float*>(k_s);
  StoreAccumulators<kWidth>(acc, 1.0f, out_s + warp_rows * L::kAccStride);
  __syncwarp();
  if (me.row < tile.n_queries) {
    // Each lane finishes half the row; both write the same lse.
    const int64_t row = tile.q_row + me.row;
    AttentionForwardFinish(out_s + me.row * L::kAccStride + me.begin(d), running_max, running_sum,
                           me.end(d) - me.begin(d), o + row * q_stride + int64_t{head} * d + me.begin(d),
                           lse + row * dims.n_heads + head);
  }
}

template <int kWidth>
__global__ void __launch_bounds__(kThreadsPerBlock)
    DqMmaKernel(AttentionDims dims, const QueryTile* tiles, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                const float* o, const float* lse, const uint16_t* d_o, bool vectorized, float* delta, float* d_q) {
  using L = Layout<kWidth>;
  SharedRegions shared;
  uint16_t* q_s = shared.Take<uint16_t>(L::kInputBytes);
  uint16_t* d_o_s = shared.Take<uint16_t>(L::kInputBytes);
  uint16_t* k_s = shared.Take<uint16_t>(L::kInputBytes);
  uint16_t* v_s = shared.Take<uint16_t>(L::kInputBytes);  // right after k_s: together the output staging
  float* s_s = shared.Take<float>(L::kScoreBytes);  // S, then P in place
  uint16_t* ds_s = shared.Take<uint16_t>(L::kWeightBytes);

  const auto [tile, head, kv_head, d, q_stride, kv_stride] = ThisQueryTileBlock(dims, tiles);
  const LaneRow me;
  const int64_t q_pos = tile.q_pos + me.row;
  const int warp_rows = me.warp * kMmaWarpRows;

  StageTile<kWidth>(q, tile.q_row, tile.n_queries, q_stride, int64_t{head} * d, d, vectorized, q_s);
  StageTile<kWidth>(d_o, tile.q_row, tile.n_queries, q_stride, int64_t{head} * d, d, vectorized, d_o_s);
  float row_lse = 0.0f, row_delta = 0.0f;
  if (me.row < tile.n_queries) {
    const int64_t row = tile.q_row + me.row;
    row_lse = lse[row * dims.n_heads + head];
    row_delta = MmaOutputGradDot(d_o + row * q_stride + int64_t{head} * d, o + row * q_stride + int64_t{head} * d, d);
    if (me.half == 0) delta[row * dims.n_heads + head] = row_delta;
  }
  // Each fragment element's row and column, and its row's D (row r's lanes
  // are 2r and 2r + 1).
  int element_rows[Accumulator::num_elements], element_cols[Accumulator::num_elements];
  AccumulatorCoordinate(s_s + warp_rows * kScoreStride, kScoreStride, /*columns=*/false, element_rows);
  AccumulatorCoordinate(s_s + warp_rows * kScoreStride, kScoreStride, /*columns=*/true, element_cols);
  float element_delta[Accumulator::num_elements];
#pragma unroll
  for (int e = 0; e < Accumulator::num_elements; ++e) {
    element_delta[e] = __shfl_sync(kFullWarp, row_delta, 2 * element_rows[e]);
  }
  Accumulator acc[kWidth / kFragment];
  ZeroAccumulators<kWidth>(acc);
  const int64_t tile_keys = tile.q_pos + tile.n_queries;
  for (int64_t j0 = 0; j0 < tile_keys; j0 += kMmaBlockCols) {
    const int staged = static_cast<int>(tile_keys - j0 < kMmaBlockCols ? tile_keys - j0 : kMmaBlockCols);
    StageTile<kWidth>(k, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, vectorized, k_s);
    StageTile<kWidth>(v, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, vectorized, v_s);
    __syncthreads();
    WarpScores<kWidth>(q_s + warp_rows * L::kInputStride, k_s, s_s + warp_rows * kScoreStride);
    __syncwarp();
    MmaQueryRowProbabilities(s_s + me.row * kScoreStride, me.score_begin(), kMmaColsPerLane, dims.softmax_scale,
                             row_lse, q_pos, j0);
    __syncwarp();  // every lane's P is in place
    WarpGradScores<kWidth>(
        d_o_s + warp_rows * L::kInputStride, v_s, s_s + warp_rows * kScoreStride,
        [&](int e, int) { return element_delta[e]; }, element_rows, element_cols, ds_s + warp_rows * kWeightStride);
    __syncwarp();
    WarpAccumulate<kWidth>(ds_s + warp_rows * kWeightStride, k_s, acc);
    __syncthreads();  // K and V are restaged next
  }
  float* out_s = reinterpret_cast<float*>(k_s);
  StoreAccumulators<kWidth>(acc, dims.softmax_scale, out_s + warp_rows * L::kAccStride);
  __syncwarp();
  if (me.row < tile.n_queries) {
    float* out = d_q + (tile.q_row + me.row) * q_stride + int64_t{head} * d;
    for (int c = me.begin(d); c < me.end(d); ++c) out[c] = out_s[me.row * L::kAccStride + c];
  }
}

template <int kWidth>
__global__ void __launch_bounds__(kThreadsPerBlock)
    DkDvMmaKernel(AttentionDims dims, const KeyTile* tiles, const QuerySegment* segments, const uint16_t* q,
                  const uint16_t* k, const uint16_t* v, const float* lse, const float* delta, const uint16_t* d_o,
                  bool vectorized, float* d_k, float* d_v) {
  using L = Layout<kWidth>;
  SharedRegions shared;
  uint16_t* k_s = shared.Take<uint16_t>(L::kInputBytes);
  uint16_t* v_s = shared.Take<uint16_t>(L::kInputBytes);
  uint16_t* q_s = shared.Take<uint16_t>(L::kInputBytes);
  uint16_t* d_o_s = shared.Take<uint16_t>(L::kInputBytes);  // right after q_s: together the output staging
  float* s_s = shared.Take<float>(L::kScoreBytes);  // S, then P in place
  uint16_t* p_s = shared.Take<uint16_t>(L::kWeightBytes);
  uint16_t* ds_s = shared.Take<uint16_t>(L::kWeightBytes);
  float* lse_s = shared.Take<float>(L::kRowBytes);
  float* delta_s = shared.Take<float>(L::kRowBytes);

  const KeyTile tile = tiles[blockIdx.x];
  const int kv_head = blockIdx.y, d = dims.head_dim;
  const int group = dims.n_heads / dims.n_kv_heads;
  const int64_t q_stride = int64_t{dims.n_heads} * d, kv_stride = int64_t{dims.n_kv_heads} * d;
  const LaneRow me;
  const int warp_rows = me.warp * kMmaWarpRows;
  // Rows past the tile's keys get a position no query reaches: all zero.
  const int64_t key_pos = me.row < tile.n_keys ? tile.k_pos + me.row : INT64_MAX;
  int element_rows[Accumulator::num_elements], element_cols[Accumulator::num_elements];
  AccumulatorCoordinate(s_s + warp_rows * kScoreStride, kScoreStride, /*columns=*/false, element_rows);
  AccumulatorCoordinate(s_s + warp_rows * kScoreStride, kScoreStride, /*columns=*/true, element_cols);

  StageTile<kWidth>(k, tile.kv_row + tile.k_pos, tile.n_keys, kv_stride, int64_t{kv_head} * d, d, vectorized, k_s);
  StageTile<kWidth>(v, tile.kv_row + tile.k_pos, tile.n_keys, kv_stride, int64_t{kv_head} * d, d, vectorized, v_s);
  Accumulator d_k_acc[kWidth / kFragment], d_v_acc[kWidth / kFragment];
  ZeroAccumulators<kWidth>(d_k_acc);
  ZeroAccumulators<kWidth>(d_v_acc);
  for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
    for (int64_t s = tile.first_segment; s < tile.first_segment + tile.n_segments; ++s) {
      const QuerySegment segment = segments[s];
      for (int64_t i0 = 0; i0 < segment.n_queries; i0 += kMmaBlockCols) {
        const int n = static_cast<int>(segment.n_queries - i0 < kMmaBlockCols ? segment.n_queries - i0
                                                                              : kMmaBlockCols);
        const int64_t row0 = segment.q_row + i0;
        StageTile<kWidth>(q, row0, n, q_stride, int64_t{head} * d, d, vectorized, q_s);
        StageTile<kWidth>(d_o, row0, n, q_stride, int64_t{head} * d, d, vectorized, d_o_s);
        for (int r = threadIdx.x; r < kMmaBlockCols; r += blockDim.x) {
          lse_s[r] = r < n ? lse[(row0 + r) * dims.n_heads + head] : 0.0f;
          delta_s[r] = r < n ? delta[(row0 + r) * dims.n_heads + head] : 0.0f;
        }
        __syncthreads();
        WarpScores<kWidth>(k_s + warp_rows * L::kInputStride, q_s, s_s + warp_rows * kScoreStride);
        __syncwarp();
        MmaKeyRowProbabilities(s_s + me.row * kScoreStride, me.score_begin(), kMmaColsPerLane, dims.softmax_scale,
                               lse_s, n, segment.q_pos + i0, key_pos, p_s + me.row * kWeightStride);
        __syncwarp();  // every lane's P is in place
        WarpGradScores<kWidth>(
            v_s + warp_rows * L::kInputStride, d_o_s, s_s + warp_rows * kScoreStride,
            [delta_s](int, int c) { return delta_s[c]; }, element_rows, element_cols,
            ds_s + warp_rows * kWeightStride);
        __syncwarp();
        WarpAccumulate<kWidth>(p_s + warp_rows * kWeightStride, d_o_s, d_v_acc);
        WarpAccumulate<kWidth>(ds_s + warp_rows * kWeightStride, q_s, d_k_acc);
        __syncthreads();  // Q and dO are restaged next
      }
    }
  }
  // The warp's rows of dK, then of dV, through the Q/dO area; added to the
  // gradients (earlier waves and layers' contributions stay).
  float* out_s = reinterpret_cast<float*>(q_s) + warp_rows * L::kAccStride;
  const float* my_out = reinterpret_cast<float*>(q_s) + me.row * L::kAccStride;
  const int64_t offset = ((tile.kv_row + tile.k_pos + me.row) * dims.n_kv_heads + kv_head) * int64_t{d};
  StoreAccumulators<kWidth>(d_k_acc, dims.softmax_scale, out_s);
  __syncwarp();
  if (me.row < tile.n_keys) {
    for (int c = me.begin(d); c < me.end(d); ++c) d_k[offset + c] += my_out[c];
  }
  __syncwarp();
  StoreAccumulators<kWidth>(d_v_acc, 1.0f, out_s);
  __syncwarp();
  if (me.row < tile.n_keys) {
    for (int c = me.begin(d); c < me.end(d); ++c) d_v[offset + c] += my_out[c];
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Opts a kernel into more than the default 48 KiB of dynamic shared memory.
template <typename Kernel>
absl::Status AllowSharedBytes(Kernel kernel, size_t bytes, const char* launch) {
  return device::CudaStatus(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)), launch);
}

template <int kWidth>
absl::Status Forward(const CoreAttentionTilesView& tiles, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                     float* o, float* lse, cudaStream_t stream) {
  constexpr const char* kLaunch = "LaunchCoreAttentionForwardBf16";
  constexpr size_t kBytes = Layout<kWidth>::kForwardBytes;
  if (absl::Status s = AllowSharedBytes(ForwardMmaKernel<kWidth>, kBytes, kLaunch); !s.ok()) return s;
  const bool vectorized = tiles.dims.head_dim % 8 == 0 && Aligned16(q) && Aligned16(k) && Aligned16(v);
  ForwardMmaKernel<kWidth><<<QueryGrid(tiles), kThreadsPerBlock, kBytes, stream>>>(tiles.dims, tiles.query_tiles, q,
                                                                                   k, v, vectorized, o, lse);
  return LaunchStatus(kLaunch);
}

template <int kWidth>
absl::Status Backward(const CoreAttentionTilesView& tiles, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                      const float* o, const float* lse, const uint16_t* d_o, float* delta, float* d_q, float* d_k,
                      float* d_v, cudaStream_t stream) {
  constexpr const char* kLaunch = "LaunchCoreAttentionBackwardBf16";
  using L = Layout<kWidth>;
  if (absl::Status s = AllowSharedBytes(DqMmaKernel<kWidth>, L::kDqBytes, kLaunch); !s.ok()) return s;
  if (absl::Status s = AllowSharedBytes(DkDvMmaKernel<kWidth>, L::kDkDvBytes, kLaunch); !s.ok()) return s;
  const bool vectorized =
      tiles.dims.head_dim % 8 == 0 && Aligned16(q) && Aligned16(k) && Aligned16(v) && Aligned16(d_o);
  DqMmaKernel<kWidth><<<QueryGrid(tiles), kThreadsPerBlock, L::kDqBytes, stream>>>(
      tiles.dims, tiles.query_tiles, q, k, v, o, lse, d_o, vectorized, delta, d_q);
  if (absl::Status s = LaunchStatus(kLaunch); !s.ok()) return s;
  return ForEachKeyWave(tiles, kLaunch, [&](const KeyTile* wave, dim3 grid) {
    DkDvMmaKernel<kWidth><<<grid, kThreadsPerBlock, L::kDkDvBytes, stream>>>(
        tiles.dims, wave, tiles.segments, q, k, v, lse, delta, d_o, vectorized, d_k, d_v);
  });
}

}  // namespace

absl::Status LaunchCoreAttentionForwardBf16(const CoreAttentionTilesView& tiles, const uint16_t* q,
                                            const uint16_t* k, const uint16_t* v, float* o, float* lse,
                                            cudaStream_t stream) {
  if (tiles.n_query_tiles == 0) return absl::OkStatus();
  switch (MmaPaddedHeadDim(tiles.dims.head_dim)) {
    case 32:
      return Forward<32>(tiles, q, k, v, o, lse, stream);
    case 64:
      return Forward<64>(tiles, q, k, v, o, lse, stream);
    case 96:
      return Forward<96>(tiles, q, k, v, o, lse, stream);
    default:
      return Forward<128>(tiles, q, k, v, o, lse, stream);
  }
}

absl::Status LaunchCoreAttentionBackwardBf16(const CoreAttentionTilesView& tiles, const uint16_t* q,
                                             const uint16_t* k, const uint16_t* v, const float* o, const float* lse,
                                             const uint16_t* d_o, float* delta, float* d_q, float* d_k, float* d_v,
                                             cudaStream_t stream) {
  if (tiles.n_query_tiles == 0) return absl::OkStatus();
  switch (MmaPaddedHeadDim(tiles.dims.head_dim)) {
    case 32:
      return Backward<32>(tiles, q, k, v, o, lse, d_o, delta, d_q, d_k, d_v, stream);
    case 64:
      return Backward<64>(tiles, q, k, v, o, lse, d_o, delta, d_q, d_k, d_v, stream);
    case 96:
      return Backward<96>(tiles, q, k, v, o, lse, d_o, delta, d_q, d_k, d_v, stream);
    default:
      return Backward<128>(tiles, q, k, v, o, lse, d_o, delta, d_q, d_k, d_v, stream);
  }
}

}  // namespace corescape::kernels::cuda
