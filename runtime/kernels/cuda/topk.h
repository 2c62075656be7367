#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_H_

// The key the top-k ranks by, the same on the device and the host
// (optim::SelectTopK, runtime/optim/sparse_mask.h): NaN counts as −∞ and −0
// as +0 (a float comparison says they are equal; their bits would not);
// ties go to the lower index. Host code as much as device code
// (kernels::host_device).
#include <cstdint>

#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::host_device {

CORESCAPE_HOST_DEVICE float TopKKey(float statistic) {
  if (statistic != statistic) return -INFINITY;
  return statistic == 0.0f ? 0.0f : statistic;
}

// What the top-k ranks: the values themselves, or their magnitudes (SCAPE's
// reference statistic |e|, read straight from the residual).
enum class TopKBy { kValue, kMagnitude };

CORESCAPE_HOST_DEVICE float TopKKey(float value, TopKBy by) {
  // -x, not fabsf: the same on both sides of the compiler; −0 becomes +0,
  // NaN stays NaN.
  return TopKKey(by == TopKBy::kMagnitude && value < 0.0f ? -value : value);
}

// TopKKey as 32 bits whose unsigned order is its order (the sign bit
// flipped for non-negatives, every bit for negatives): what radix passes
// read, and what optim::SelectTopK ranks by on the host.
CORESCAPE_HOST_DEVICE uint32_t TopKOrderKey(float value, TopKBy by) {
  const float key = TopKKey(value, by);
#if defined(__CUDA_ARCH__)
  const uint32_t bits = __float_as_uint(key);
#else
  uint32_t bits;
  __builtin_memcpy(&bits, &key, sizeof(bits));
#endif
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The device top-k is a radix select: four passes over the keys, 8 bits
// each from the top, find the k-th largest key T (each pass histograms the
// next digit of the keys that share the digits found so far and keeps the
// bin holding the k-th); then one ordered pass takes every key above T and
// the first `remaining` keys equal to T, in index order, ascending: the set
// optim::SelectTopK picks, in O(n) work and O(n / tile) scratch.
inline constexpr int kTopKRadixPasses = 4;
inline constexpr int kTopKRadixBins = 256;

CORESCAPE_HOST_DEVICE uint32_t TopKDigit(uint32_t key, int pass) {
  return (key >> (24 - 8 * pass)) & 0xFFu;
}

// Whether `key` has the digits of `prefix` above pass `pass`'s.
CORESCAPE_HOST_DEVICE bool TopKPrefixMatches(uint32_t key, uint32_t prefix, int pass) {
  return pass == 0 || (key >> (32 - 8 * pass)) == (prefix >> (32 - 8 * pass));
}

// Where a radix select stands: the digits of T found so far, and how many
// of the keys sharing them are still to be taken (those with larger digits
// are taken already).
struct TopKRadixState {
  uint32_t prefix;
  int64_t remaining;
};

// After pass `pass`'s histogram of the matching keys' digits: the bin
// holding the remaining-th largest joins the prefix, and the keys in the
// bins above it are taken.
CORESCAPE_HOST_DEVICE void TopKChooseBin(const unsigned long long* histogram, int pass,
                                        TopKRadixState& state) {
  int64_t above = 0;
  for (int bin = kTopKRadixBins - 1; bin >= 0; --bin) {
    const int64_t in_bin = static_cast<int64_t>(histogram[bin]);
    if (above + in_bin >= state.remaining || bin == 0) {
      state.prefix |= static_cast<uint32_t>(bin) << (24 - 8 * pass);
      state.remaining -= above;
      return;
    }
    above += in_bin;
  }
}

// After the last pass (threshold = T): whether the key at an index with
// `equal_before` keys equal to T before it is taken.
CORESCAPE_HOST_DEVICE bool TopKTaken(uint32_t key, uint32_t threshold, int64_t equal_before,
                                     int64_t remaining) {
  return key > threshold || (key == threshold && equal_before < remaining);
}

// A segmented top-k ranks several ranges in one sequence of launches (SCAPE's
// per-tensor masks: every tensor of a rank at once): segment s's k entries
// with the largest keys among statistic[offset, offset + numel), as
// begin + offset + i, ascending, the segments' one after another.
struct TopKSegment {
  int64_t offset = 0;
  int64_t numel = 0;
  int64_t k = 0;
};

// A segment as the launches see it: k clamped to [0, numel], where its
// output starts, and where its tiles start in the launch's tile numbering
// (tiles never straddle two segments).
struct TopKSegmentPlan {
  int64_t offset;
  int64_t numel;
  int64_t k;
  int64_t out_begin;
  int64_t first_tile;
};

// The segment tile `tile` belongs to: the last of plan[0, segments) whose
// first tile is at or before it (an empty segment before it has the same
// first tile and is passed over).
CORESCAPE_HOST_DEVICE int TopKSegmentOfTile(const TopKSegmentPlan* plan, int segments,
                                            int64_t tile) {
  int low = 0, high = segments - 1;
  while (low < high) {
    const int middle = (low + high + 1) / 2;
    if (plan[middle].first_tile <= tile) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  return low;
}

// Plans `segments` (each non-negative; k clamped) for tiles of `tile`
// entries: segments that take nothing are left out. `*tiles` and
// `*selected` receive the tile count and the output's length.
inline void PlanTopKSegments(const TopKSegment* segments, int count, int64_t tile,
                             TopKSegmentPlan* plan, int* planned, int64_t* tiles,
                             int64_t* selected) {
  *planned = 0;
  *tiles = 0;
  *selected = 0;
  for (int s = 0; s < count; ++s) {
    const TopKSegment& segment = segments[s];
    const int64_t k = segment.k < 0 ? 0 : (segment.k > segment.numel ? segment.numel : segment.k);
    if (k == 0) continue;
    plan[(*planned)++] = TopKSegmentPlan{segment.offset, segment.numel, k, *selected, *tiles};
    *selected += k;
    *tiles += (segment.numel + tile - 1) / tile;
  }
}

}  // namespace corescape::kernels::host_device

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_H_
