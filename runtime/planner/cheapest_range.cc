#include "runtime/planner/cheapest_range.h"

#include <algorithm>
#include <cmath>

#include "runtime/planner/causal_pairs.h"

namespace corescape::planner {

int64_t RangeBytes(QueryRange r, int64_t q_bytes, int64_t kv_bytes, int64_t piece_pairs) {
  int64_t bytes = (r.end - r.begin) * q_bytes;
  // At most 64 pieces are modelled: past that the estimate is already poor
  // and the walk would cost more than it tells.
  const int64_t pairs = CausalPairs(r.begin, r.end);
  if (piece_pairs > 0) piece_pairs = std::max(piece_pairs, pairs / 64 + 1);
  for (int64_t end = r.end; end > r.begin;) {
    bytes += end * kv_bytes;
    if (piece_pairs <= 0) break;
    const int64_t begin = std::max(r.begin, BeginForAtMost(end, piece_pairs));
    end = begin < end ? begin : end - 1;
  }
  return bytes;
}

QueryRange CheapestRange(int64_t length, int64_t edge_pairs, int64_t interior_pairs,
                         int64_t q_bytes, int64_t kv_bytes, int64_t piece_pairs) {
  const QueryRange whole{0, length};
  if (DocumentPairs(length) <= edge_pairs) return whole;
  const int64_t head_end = EndForAtLeast(0, edge_pairs, length);
  // The range ending at b: as short as the pairs allow.
  auto ending_at = [&](int64_t b) {
    if (b >= length) return QueryRange{BeginForAtLeast(length, edge_pairs), length};
    const int64_t a = BeginForAtLeast(b, interior_pairs);
    if (a > 0 && CausalPairs(a, b) >= interior_pairs) return QueryRange{a, b};
    return QueryRange{0, std::max(b, head_end)};
  };
  QueryRange best{0, head_end};
  int64_t best_bytes = RangeBytes(best, q_bytes, kv_bytes, piece_pairs);
  auto consider = [&](int64_t b) {
    const QueryRange r = ending_at(std::clamp(b, head_end, length));
    const int64_t bytes = RangeBytes(r, q_bytes, kv_bytes, piece_pairs);
    if (bytes < best_bytes || (bytes == best_bytes && r.end < best.end)) {
      best = r;
      best_bytes = bytes;
    }
  };
  consider(length);  // tail
  // Single piece: around the continuous optimum.
  const double rho = 1.0 + static_cast<double>(kv_bytes) / static_cast<double>(q_bytes);
  if (rho > 1.0) {
    const double b_opt =
        rho * std::sqrt(2.0 * static_cast<double>(interior_pairs) / (rho * rho - 1.0));
    const int64_t centre = std::min<int64_t>(std::llround(b_opt), length);
    for (int64_t offset = -3; offset <= 3; ++offset) consider(centre + offset);
  }
  if (piece_pairs <= 0 || piece_pairs >= interior_pairs) return best;
  // Several pieces: a coarse-to-fine scan of the end, since the piece model
  // makes the bytes bumpy in b (no closed form).
  int64_t lo = head_end, hi = length;
  constexpr int kPoints = 32;
  while (hi - lo > 2 * kPoints) {
    const int64_t step = (hi - lo) / kPoints;
    int64_t best_b = lo;
    int64_t best_here = -1;
    for (int64_t b = lo; b <= hi; b += step) {
      const QueryRange r = ending_at(b);
      const int64_t bytes = RangeBytes(r, q_bytes, kv_bytes, piece_pairs);
      if (best_here < 0 || bytes < best_here) best_here = bytes, best_b = b;
      if (bytes < best_bytes) best = r, best_bytes = bytes;
    }
    lo = std::max(head_end, best_b - step);
    hi = std::min(length, best_b + step);
  }
  for (int64_t b = lo; b <= hi; ++b) consider(b);
  return best;
}

}  // namespace corescape::planner
