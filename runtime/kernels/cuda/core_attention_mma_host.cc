#include "runtime/kernels/cuda/core_attention_mma_host.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/kernels/cuda/core_attention_mma.h"

namespace corescape::kernels::cuda {
namespace {

constexpr int kRows = kMmaTileRows, kCols = kMmaBlockCols;

// A 64-row tile of one head in fp32, zero-padded to `width` columns and
// past `n` rows: what the launches stage in shared memory as bf16.
struct Tile {
  Tile(int width) : width(width), values(static_cast<size_t>(kRows) * width) {}
  float* row(int r) { return values.data() + static_cast<size_t>(r) * width; }
  const float* row(int r) const { return values.data() + static_cast<size_t>(r) * width; }
  int width;
  std::vector<float> values;
};

void Stage(const uint16_t* src, int64_t row0, int n, int64_t row_stride, int64_t head_offset, int head_dim,
           Tile& tile) {
  std::fill(tile.values.begin(), tile.values.end(), 0.0f);
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < head_dim; ++c) tile.row(r)[c] = FloatFromBf16(src[(row0 + r) * row_stride + head_offset + c]);
  }
}

// out[r][j] = Σ_c a[r][c]·b[j][c] (a times b transposed), 64 × 64.
void ProductTransposed(const Tile& a, const Tile& b, std::vector<float>& out) {
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < kCols; ++j) {
      float sum = 0.0f;
      for (int c = 0; c < a.width; ++c) sum += a.row(r)[c] * b.row(j)[c];
      out[r * kCols + j] = sum;
    }
  }
}

// acc[r][c] += Σ_j p[r][j]·b[j][c], p in bf16.
void AccumulateProduct(const std::vector<uint16_t>& p, const Tile& b, Tile& acc) {
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < b.width; ++c) {
      float sum = 0.0f;
      for (int j = 0; j < kCols; ++j) sum += FloatFromBf16(p[r * kCols + j]) * b.row(j)[c];
      acc.row(r)[c] += sum;
    }
  }
}

}  // namespace

void HostMmaAttentionForward(const CoreAttentionTiles& plan, const uint16_t* q, const uint16_t* k,
                             const uint16_t* v, float* o, float* lse) {
  const AttentionDims& dims = plan.dims;
  const int d = dims.head_dim, width = MmaPaddedHeadDim(d);
  const int64_t q_stride = int64_t{dims.n_heads} * d, kv_stride = int64_t{dims.n_kv_heads} * d;
  Tile q_tile(width), k_tile(width), v_tile(width), acc(width);
  std::vector<float> s(kRows * kCols);
  std::vector<uint16_t> p(kRows * kCols);
  for (const QueryTile& tile : plan.query_tiles) {
    for (int head = 0; head < dims.n_heads; ++head) {
      const int kv_head = head / (dims.n_heads / dims.n_kv_heads);
      Stage(q, tile.q_row, tile.n_queries, q_stride, int64_t{head} * d, d, q_tile);
      std::fill(acc.values.begin(), acc.values.end(), 0.0f);
      std::vector<float> running_max(kRows, -INFINITY), running_sum(kRows, 0.0f);
      const int64_t tile_keys = tile.q_pos + tile.n_queries;
      for (int64_t j0 = 0; j0 < tile_keys; j0 += kCols) {
        const int staged = static_cast<int>(std::min<int64_t>(kCols, tile_keys - j0));
        Stage(k, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, k_tile);
        Stage(v, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, v_tile);
        ProductTransposed(q_tile, k_tile, s);
        for (int r = 0; r < kRows; ++r) {
          const float* s_row = &s[r * kCols];
          const int64_t q_pos = tile.q_pos + r;
          const float block_max =
              fmaxf(MmaScoreMax(s_row, 0, kMmaColsPerLane, dims.softmax_scale, q_pos, j0),
                    MmaScoreMax(s_row, kMmaColsPerLane, kMmaColsPerLane, dims.softmax_scale, q_pos, j0));
          const float correction = MmaRaiseMax(block_max, &running_max[r]);
          const float sum = MmaExpScores(s_row, 0, kMmaColsPerLane, dims.softmax_scale, q_pos, j0,
                                         running_max[r], &p[r * kCols]) +
                            MmaExpScores(s_row, kMmaColsPerLane, kMmaColsPerLane, dims.softmax_scale, q_pos, j0,
                                         running_max[r], &p[r * kCols]);
          running_sum[r] = running_sum[r] * correction + sum;
          for (int c = 0; c < width; ++c) acc.row(r)[c] *= correction;
        }
        AccumulateProduct(p, v_tile, acc);
      }
      for (int r = 0; r < tile.n_queries; ++r) {
        const int64_t row = tile.q_row + r;
        AttentionForwardFinish(acc.row(r), running_max[r], running_sum[r], d, o + row * q_stride + head * d,
                               lse + row * dims.n_heads + head);
      }
    }
  }
}

void HostMmaAttentionBackward(const CoreAttentionTiles& plan, const uint16_t* q, const uint16_t* k,
                              const uint16_t* v, const float* o, const float* lse, const uint16_t* d_o,
                              float* delta, float* d_q, float* d_k, float* d_v) {
  const AttentionDims& dims = plan.dims;
  const int d = dims.head_dim, width = MmaPaddedHeadDim(d);
  const int group = dims.n_heads / dims.n_kv_heads;
  const int64_t q_stride = int64_t{dims.n_heads} * d, kv_stride = int64_t{dims.n_kv_heads} * d;
  Tile q_tile(width), d_o_tile(width), k_tile(width), v_tile(width), acc(width), acc2(width);
  std::vector<float> s(kRows * kCols), dp(kRows * kCols);
  std::vector<uint16_t> p(kRows * kCols), ds(kRows * kCols);
  std::vector<float> tile_lse(kRows), tile_delta(kRows);

  // D and dQ per (query tile, head).
  for (const QueryTile& tile : plan.query_tiles) {
    for (int head = 0; head < dims.n_heads; ++head) {
      const int kv_head = head / group;
      Stage(q, tile.q_row, tile.n_queries, q_stride, int64_t{head} * d, d, q_tile);
      Stage(d_o, tile.q_row, tile.n_queries, q_stride, int64_t{head} * d, d, d_o_tile);
      for (int r = 0; r < kRows; ++r) {
        tile_lse[r] = tile_delta[r] = 0.0f;
        if (r >= tile.n_queries) continue;
        const int64_t row = tile.q_row + r;
        tile_delta[r] = MmaOutputGradDot(d_o + row * q_stride + head * d, o + row * q_stride + head * d, d);
        delta[row * dims.n_heads + head] = tile_delta[r];
        tile_lse[r] = lse[row * dims.n_heads + head];
      }
      std::fill(acc.values.begin(), acc.values.end(), 0.0f);
      const int64_t tile_keys = tile.q_pos + tile.n_queries;
      for (int64_t j0 = 0; j0 < tile_keys; j0 += kCols) {
        const int staged = static_cast<int>(std::min<int64_t>(kCols, tile_keys - j0));
        Stage(k, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, k_tile);
        Stage(v, tile.kv_row + j0, staged, kv_stride, int64_t{kv_head} * d, d, v_tile);
        ProductTransposed(q_tile, k_tile, s);
        ProductTransposed(d_o_tile, v_tile, dp);
        for (int r = 0; r < kRows; ++r) {
          for (int c0 = 0; c0 < kCols; c0 += kMmaColsPerLane) {
            MmaQueryRowProbabilities(&s[r * kCols], c0, kMmaColsPerLane, dims.softmax_scale, tile_lse[r],
                                     tile.q_pos + r, j0);
          }
          for (int c = 0; c < kCols; ++c) {
            ds[r * kCols + c] = Bf16FromFloat(MmaGradScore(s[r * kCols + c], dp[r * kCols + c], tile_delta[r]));
          }
        }
        AccumulateProduct(ds, k_tile, acc);
      }
      for (int r = 0; r < tile.n_queries; ++r) {
        float* out = d_q + (tile.q_row + r) * q_stride + head * d;
        for (int c = 0; c < d; ++c) out[c] = dims.softmax_scale * acc.row(r)[c];
      }
    }
  }

  // dK, dV per (key tile, kv head), waves in order.
  for (const KeyTile& tile : plan.key_tiles) {
    for (int kv_head = 0; kv_head < dims.n_kv_heads; ++kv_head) {
      Stage(k, tile.kv_row + tile.k_pos, tile.n_keys, kv_stride, int64_t{kv_head} * d, d, k_tile);
      Stage(v, tile.kv_row + tile.k_pos, tile.n_keys, kv_stride, int64_t{kv_head} * d, d, v_tile);
      std::fill(acc.values.begin(), acc.values.end(), 0.0f);   // dK
      std::fill(acc2.values.begin(), acc2.values.end(), 0.0f);  // dV
      for (int head = kv_head * group; head < (kv_head + 1) * group; ++head) {
        for (int64_t sgm = tile.first_segment; sgm < tile.first_segment + tile.n_segments; ++sgm) {
          const QuerySegment& segment = plan.segments[sgm];
          for (int64_t i0 = 0; i0 < segment.n_queries; i0 += kCols) {
            const int n = static_cast<int>(std::min<int64_t>(kCols, segment.n_queries - i0));
            const int64_t row0 = segment.q_row + i0;
            Stage(q, row0, n, q_stride, int64_t{head} * d, d, q_tile);
            Stage(d_o, row0, n, q_stride, int64_t{head} * d, d, d_o_tile);
            for (int r = 0; r < kCols; ++r) {
              tile_lse[r] = r < n ? lse[(row0 + r) * dims.n_heads + head] : 0.0f;
              tile_delta[r] = r < n ? delta[(row0 + r) * dims.n_heads + head] : 0.0f;
            }
            ProductTransposed(k_tile, q_tile, s);
            ProductTransposed(v_tile, d_o_tile, dp);
            for (int r = 0; r < kRows; ++r) {
              const int64_t key_pos = r < tile.n_keys ? tile.k_pos + r : std::numeric_limits<int64_t>::max();
              for (int c0 = 0; c0 < kCols; c0 += kMmaColsPerLane) {
                MmaKeyRowProbabilities(&s[r * kCols], c0, kMmaColsPerLane, dims.softmax_scale, tile_lse.data(), n,
                                       segment.q_pos + i0, key_pos, &p[r * kCols]);
              }
              for (int c = 0; c < kCols; ++c) {
                ds[r * kCols + c] = Bf16FromFloat(MmaGradScore(s[r * kCols + c], dp[r * kCols + c], tile_delta[c]));
              }
            }
            AccumulateProduct(p, d_o_tile, acc2);
            AccumulateProduct(ds, q_tile, acc);
          }
        }
      }
      for (int r = 0; r < tile.n_keys; ++r) {
        const int64_t offset = ((tile.kv_row + tile.k_pos + r) * dims.n_kv_heads + kv_head) * int64_t{d};
        for (int c = 0; c < d; ++c) {
          d_k[offset + c] += dims.softmax_scale * acc.row(r)[c];
          d_v[offset + c] += acc2.row(r)[c];
        }
      }
    }
  }
}

}  // namespace corescape::kernels::cuda
