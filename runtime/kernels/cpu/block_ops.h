#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_BLOCK_OPS_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_BLOCK_OPS_H_

// Building blocks of the blocked attention kernels: tile sizes, the block
// matrix product, and per-row softmax steps written as plain fixed-length
// loops that gcc -O2 vectorises (with -fno-trapping-math, set in BUILD: the
// float compares in clamps and masks otherwise count as possible traps and
// keep the loops scalar).

#include <algorithm>
#include <bit>
#include <cstdint>

namespace corescape::kernels::cpu {

// Keys per tile. A compile-time width lets the per-score loops below run a
// known trip count, which gcc's -O2 cost model requires to vectorise them.
inline constexpr int kKeyTile = 64;
inline constexpr int kMaxQueryTile = 64;

// OpenBLAS (0.3.21) runs an sgemm on its own threads once m*n*k exceeds 2^18,
// which would compete with our pool's threads; every tile product stays at
// or under that, so query tiles shrink for head_dim > 64.
inline constexpr int64_t kMaxTileProduct = int64_t{1} << 18;

inline int QueryTileRows(int head_dim) {
  return static_cast<int>(std::clamp<int64_t>(
      kMaxTileProduct / (int64_t{kKeyTile} * head_dim), 1, kMaxQueryTile));
}

// Row-major C[m x n] = alpha * op(A) * op(B) + beta * C, where op(A) is
// m x k and op(B) is k x n; a_t / b_t transpose. Leading dimensions are the
// row strides of the matrices as stored.
void Gemm(bool a_t, bool b_t, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc);

// exp(x) with ~2 ulp error for x in [-87, 88] (clamped outside), as straight-
// line float/int arithmetic so loops over it vectorise: glibc's expf is a
// call per element and costs as much as the tile products.
inline float VectorExp(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln(2) / 2. Adding
  // 1.5 * 2^23 rounds to the nearest integer in float arithmetic.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // ln 2 split in two (Cody-Waite) so r keeps full precision.
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  const float p =
      ((((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) *
              r + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) *
       (r * r)) + r + 1.0f;
  const int32_t exponent_bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(exponent_bits);
}

// The first `valid` entries of a score row become exp(row[j] - shift); the
// rest of the tile row becomes 0 (masked or past the last key).
inline void ExpShiftedRow(float* row, float shift, int valid) {
  for (int j = 0; j < kKeyTile; ++j) {
    const float e = VectorExp(row[j] - shift);
    row[j] = j < valid ? e : 0.0f;
  }
}

// Score gradients of one tile row: dS = P * (dP - delta) for the first
// `valid` entries, 0 after. p and d_scores are distinct rows (restrict lets
// gcc vectorise without a runtime overlap check).
inline void GradScoresRow(const float* __restrict p, float* __restrict d_scores,
                          float delta, int valid) {
  for (int j = 0; j < kKeyTile; ++j) {
    const float ds = p[j] * (d_scores[j] - delta);
    d_scores[j] = j < valid ? ds : 0.0f;
  }
}

// Max of row[0, valid), valid >= 1. Eight lanes so it vectorises; the loads
// are unconditional so gcc need not prove them safe.
inline float RowMax(const float* row, int valid) {
  const float first = row[0];
  float lanes[8];
  for (int l = 0; l < 8; ++l) lanes[l] = first;
  for (int j = 0; j < kKeyTile; j += 8) {
    for (int l = 0; l < 8; ++l) {
      const float loaded = row[j + l];
      const float x = j + l < valid ? loaded : first;
      lanes[l] = lanes[l] > x ? lanes[l] : x;
    }
  }
  float max = lanes[0];
  for (int l = 1; l < 8; ++l) max = max > lanes[l] ? max : lanes[l];
  return max;
}

// Sum of a whole tile row, in eight lanes summed in a fixed order so the
// result is the same on every run.
inline float RowSum(const float* row) {
  float lanes[8] = {};
  for (int j = 0; j < kKeyTile; j += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] += row[j + l];
  }
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

}  // namespace corescape::kernels::cpu

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_BLOCK_OPS_H_
