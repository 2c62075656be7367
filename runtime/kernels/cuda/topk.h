#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_H_

// The key the top-k ranks by, the same on the device and the host
// (optim::SelectTopK, runtime/optim/sparse_mask.h): NaN counts as −∞ and −0
// as +0 (a float comparison says they are equal; their bits would not);
// ties go to the lower index.
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

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

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_TOPK_H_
