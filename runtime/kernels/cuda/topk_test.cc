// The device top-k on the CPU: its radix passes, run with the same bodies,
// must pick optim::SelectTopK's set, ascending — including ties, NaN,
// signed zeros and keys that share their top digits.
#include "runtime/kernels/cuda/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <iterator>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::kernels::cuda {
namespace {

// The device top-k's passes run on the host with the same bodies: four
// radix passes find T and how many keys equal to it are taken, then tiles
// of `tile` entries are counted, their counts scanned, and each tile takes
// its entries in order at the positions the scans give (what the launches
// do with a tile per block).
std::vector<int64_t> RadixSelection(const std::vector<float>& statistic, int64_t begin, int64_t k,
                                    TopKBy by, int64_t tile) {
  const int64_t n = static_cast<int64_t>(statistic.size());
  k = std::clamp<int64_t>(k, 0, n);
  std::vector<int64_t> out(k);
  if (k == 0) return out;
  TopKRadixState state{0, k};
  for (int pass = 0; pass < kTopKRadixPasses; ++pass) {
    std::vector<unsigned long long> histogram(kTopKRadixBins, 0);
    for (float x : statistic) {
      const uint32_t key = TopKOrderKey(x, by);
      if (TopKPrefixMatches(key, state.prefix, pass)) ++histogram[TopKDigit(key, pass)];
    }
    TopKChooseBin(histogram.data(), pass, state);
  }
  const int64_t tiles = (n + tile - 1) / tile;
  std::vector<int64_t> greater(tiles, 0), equal(tiles, 0);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t key = TopKOrderKey(statistic[i], by);
    greater[i / tile] += key > state.prefix;
    equal[i / tile] += key == state.prefix;
  }
  std::exclusive_scan(greater.begin(), greater.end(), greater.begin(), int64_t{0});
  std::exclusive_scan(equal.begin(), equal.end(), equal.begin(), int64_t{0});
  for (int64_t t = 0; t < tiles; ++t) {
    int64_t greater_before = greater[t], equal_before = equal[t];
    for (int64_t i = t * tile; i < std::min(n, (t + 1) * tile); ++i) {
      const uint32_t key = TopKOrderKey(statistic[i], by);
      if (TopKTaken(key, state.prefix, equal_before, state.remaining)) {
        out[greater_before + std::min(equal_before, state.remaining)] = begin + i;
      }
      greater_before += key > state.prefix;
      equal_before += key == state.prefix;
    }
  }
  return out;
}

// By value and by magnitude, over values full of ties (in value and across
// signs), NaN, signed zeros and infinities.
TEST(TopKKey, SelectsWhatSelectTopKSelects) {
  for (TopKBy by : {TopKBy::kValue, TopKBy::kMagnitude}) {
    std::mt19937 rng(17);
    std::uniform_int_distribution<int> small(0, 6);
    for (int trial = 0; trial < 200; ++trial) {
      const int64_t n = 1 + trial * 7;
      std::vector<float> v(n);
      for (float& x : v) {
        switch (small(rng)) {
          case 0: x = NAN; break;
          case 1: x = -0.0f; break;
          case 2: x = 0.0f; break;
          case 3: x = static_cast<float>(small(rng)); break;
          case 4: x = -static_cast<float>(small(rng)); break;
          case 5: x = -INFINITY; break;
          default: x = std::ldexp(static_cast<float>(rng() % 1000) - 500.0f, -5); break;
        }
      }
      std::vector<float> statistic = v;
      if (by == TopKBy::kMagnitude) {
        for (float& x : statistic) x = std::fabs(x);
      }
      for (int64_t k : {int64_t{0}, int64_t{1}, n / 10, n / 2, n, n + 3}) {
        for (int64_t tile : {int64_t{1}, int64_t{7}, int64_t{2048}}) {
          ASSERT_EQ(RadixSelection(v, 1000, k, by, tile), optim::SelectTopK(statistic, 1000, k))
              << (by == TopKBy::kMagnitude ? "by magnitude" : "by value") << " trial " << trial
              << " k " << k << " tile " << tile;
        }
      }
    }
  }
}

// Keys that differ only in their last digit (every pass but the last keeps
// one bin) and keys spread over every digit.
TEST(TopKKey, RadixPassesFindTheKthKeyWhereverItsDigitsDiffer) {
  std::mt19937 rng(5);
  for (int shape = 0; shape < 3; ++shape) {
    std::vector<float> v(5000);
    for (size_t i = 0; i < v.size(); ++i) {
      switch (shape) {
        case 0: v[i] = 1.0f + std::ldexp(static_cast<float>(rng() % 256), -23); break;  // low byte only
        case 1: v[i] = std::ldexp(1.0f, static_cast<int>(rng() % 200) - 100) * (rng() % 2 ? 1 : -1); break;
        default: v[i] = static_cast<float>(rng() % 3); break;  // three values: ties everywhere
      }
    }
    for (int64_t k : {int64_t{1}, int64_t{17}, int64_t{2500}, int64_t{4999}}) {
      for (TopKBy by : {TopKBy::kValue, TopKBy::kMagnitude}) {
        std::vector<float> statistic = v;
        if (by == TopKBy::kMagnitude) {
          for (float& x : statistic) x = std::fabs(x);
        }
        ASSERT_EQ(RadixSelection(v, 0, k, by, 64), optim::SelectTopK(statistic, 0, k))
            << "shape " << shape << " k " << k;
      }
    }
  }
}

TEST(TopKKey, OrderKeysOrderLikeTheKeys) {
  const float values[] = {-INFINITY, -3.0f, -1e-30f, 0.0f, 1e-30f, 2.0f, INFINITY};
  for (size_t i = 0; i + 1 < std::size(values); ++i) {
    EXPECT_LT(TopKOrderKey(values[i], TopKBy::kValue), TopKOrderKey(values[i + 1], TopKBy::kValue));
  }
  EXPECT_EQ(TopKOrderKey(-0.0f, TopKBy::kValue), TopKOrderKey(0.0f, TopKBy::kValue));
  EXPECT_EQ(TopKOrderKey(NAN, TopKBy::kValue), TopKOrderKey(-INFINITY, TopKBy::kValue));
  EXPECT_EQ(TopKOrderKey(-2.0f, TopKBy::kMagnitude), TopKOrderKey(2.0f, TopKBy::kMagnitude));
}

TEST(TopKKey, MapsNaNToMinusInfinityAndMinusZeroToZero) {
  EXPECT_EQ(TopKKey(NAN), -INFINITY);
  EXPECT_FALSE(std::signbit(TopKKey(-0.0f)));
  EXPECT_EQ(TopKKey(-2.5f), -2.5f);
  EXPECT_EQ(TopKKey(INFINITY), INFINITY);
  EXPECT_EQ(TopKKey(-2.5f, TopKBy::kMagnitude), 2.5f);
  EXPECT_EQ(TopKKey(-INFINITY, TopKBy::kMagnitude), INFINITY);
  EXPECT_EQ(TopKKey(NAN, TopKBy::kMagnitude), -INFINITY);
  EXPECT_FALSE(std::signbit(TopKKey(-0.0f, TopKBy::kMagnitude)));
}

}  // namespace
}  // namespace corescape::kernels::cuda
