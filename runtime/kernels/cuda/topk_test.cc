// The device top-k on the CPU: its radix passes, run with the same bodies,
// must pick optim::SelectTopK's set, ascending — including ties, NaN,
// signed zeros and keys that share their top digits.
#include "runtime/kernels/cuda/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <iterator>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cuda/topk_test_util.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::kernels::host_device {
namespace {

using cuda::SelectTopKPerSegment;

// The device top-k's launches run on the host with the same bodies: the
// segments planned into tiles of `tile` entries; per segment, four radix
// passes over its tiles (each tile finding its segment as a block does)
// find T and how many keys equal to it are taken; then every tile is
// counted, the counts scanned across all tiles, and each tile takes its
// entries in order at the positions the scans give less its segment's
// first tile's.
std::vector<int64_t> RadixSelectionInSegments(const std::vector<float>& statistic,
                                              const std::vector<TopKSegment>& segments,
                                              int64_t begin, TopKBy by, int64_t tile) {
  std::vector<TopKSegmentPlan> plan(segments.size());
  int planned = 0;
  int64_t tiles = 0, selected = 0;
  PlanTopKSegments(segments.data(), static_cast<int>(segments.size()), tile, plan.data(), &planned,
                   &tiles, &selected);
  std::vector<int64_t> out(selected);
  if (planned == 0) return out;
  // Where tile t lies: its segment, and its entries' offsets in the statistic.
  auto tile_range = [&](int64_t t) {
    const int s = TopKSegmentOfTile(plan.data(), planned, t);
    const int64_t first = (t - plan[s].first_tile) * tile;
    return std::tuple{s, plan[s].offset + first,
                      plan[s].offset + std::min(plan[s].numel, first + tile)};
  };
  std::vector<TopKRadixState> state(planned);
  for (int s = 0; s < planned; ++s) state[s] = TopKRadixState{0, plan[s].k};
  for (int pass = 0; pass < kTopKRadixPasses; ++pass) {
    std::vector<unsigned long long> histogram(int64_t{planned} * kTopKRadixBins, 0);
    for (int64_t t = 0; t < tiles; ++t) {
      const auto [s, from, to] = tile_range(t);
      for (int64_t i = from; i < to; ++i) {
        const uint32_t key = TopKOrderKey(statistic[i], by);
        if (TopKPrefixMatches(key, state[s].prefix, pass)) {
          ++histogram[int64_t{s} * kTopKRadixBins + TopKDigit(key, pass)];
        }
      }
    }
    for (int s = 0; s < planned; ++s) {
      TopKChooseBin(histogram.data() + int64_t{s} * kTopKRadixBins, pass, state[s]);
    }
  }
  std::vector<int64_t> greater(tiles, 0), equal(tiles, 0);
  for (int64_t t = 0; t < tiles; ++t) {
    const auto [s, from, to] = tile_range(t);
    for (int64_t i = from; i < to; ++i) {
      const uint32_t key = TopKOrderKey(statistic[i], by);
      greater[t] += key > state[s].prefix;
      equal[t] += key == state[s].prefix;
    }
  }
  std::exclusive_scan(greater.begin(), greater.end(), greater.begin(), int64_t{0});
  std::exclusive_scan(equal.begin(), equal.end(), equal.begin(), int64_t{0});
  for (int64_t t = 0; t < tiles; ++t) {
    const auto [s, from, to] = tile_range(t);
    int64_t greater_before = greater[t] - greater[plan[s].first_tile];
    int64_t equal_before = equal[t] - equal[plan[s].first_tile];
    for (int64_t i = from; i < to; ++i) {
      const uint32_t key = TopKOrderKey(statistic[i], by);
      if (TopKTaken(key, state[s].prefix, equal_before, state[s].remaining)) {
        out[plan[s].out_begin + greater_before + std::min(equal_before, state[s].remaining)] =
            begin + i;
      }
      greater_before += key > state[s].prefix;
      equal_before += key == state[s].prefix;
    }
  }
  return out;
}

std::vector<int64_t> RadixSelection(const std::vector<float>& statistic, int64_t begin, int64_t k,
                                    TopKBy by, int64_t tile) {
  return RadixSelectionInSegments(
      statistic, {TopKSegment{0, static_cast<int64_t>(statistic.size()), k}}, begin, by, tile);
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

// Several segments in one selection (per-tensor masks): each segment's own
// top k, in segment order, whatever the tiles; empty segments, k = 0,
// k ≥ numel and gaps between segments included.
TEST(TopKKey, SegmentsSelectEachTheirOwnTopKInOrder) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<TopKSegment> segments;
    int64_t at = static_cast<int64_t>(rng() % 5);
    const int count = 1 + static_cast<int>(rng() % 9);
    for (int s = 0; s < count; ++s) {
      const int64_t numel = rng() % 4 == 0 ? static_cast<int64_t>(rng() % 3)
                                           : static_cast<int64_t>(rng() % 3000);
      int64_t k;
      switch (rng() % 4) {
        case 0: k = 0; break;
        case 1: k = numel + static_cast<int64_t>(rng() % 3); break;
        default: k = numel > 0 ? static_cast<int64_t>(rng() % numel) + 1 : 0; break;
      }
      segments.push_back({at, numel, k});
      at += numel + static_cast<int64_t>(rng() % 4);  // maybe a gap
    }
    std::vector<float> v(at);
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 64) - 32) / 4.0f;
    for (TopKBy by : {TopKBy::kValue, TopKBy::kMagnitude}) {
      std::vector<float> statistic = v;
      if (by == TopKBy::kMagnitude) {
        for (float& x : statistic) x = std::fabs(x);
      }
      const std::vector<int64_t> expected = SelectTopKPerSegment(statistic, segments, 500);
      for (int64_t tile : {int64_t{1}, int64_t{5}, int64_t{2048}}) {
        ASSERT_EQ(RadixSelectionInSegments(v, segments, 500, by, tile), expected)
            << "trial " << trial << " tile " << tile;
      }
    }
  }
}

TEST(TopKKey, SegmentOfTileSkipsEmptySegments) {
  // Segments of 2, 0, 0, 3 and 1 tiles; the empty ones start where the
  // next begins.
  const TopKSegmentPlan plan[] = {{0, 0, 1, 0, 0}, {0, 0, 1, 0, 2}, {0, 0, 1, 0, 2},
                                  {0, 0, 1, 0, 2}, {0, 0, 1, 0, 5}};
  const int expected[] = {0, 0, 3, 3, 3, 4};
  for (int64_t t = 0; t < 6; ++t) EXPECT_EQ(TopKSegmentOfTile(plan, 5, t), expected[t]) << t;
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
}  // namespace corescape::kernels::host_device
