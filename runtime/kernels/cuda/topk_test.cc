// The device top-k's ordering on the CPU: a stable descending sort by
// TopKKey, first k indices ascending, must pick optim::SelectTopK's set —
// including ties, NaN and signed zeros.
#include "runtime/kernels/cuda/topk.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::kernels::cuda {
namespace {

std::vector<int64_t> StableSortSelection(const std::vector<float>& statistic, int64_t begin, int64_t k,
                                         TopKBy by = TopKBy::kValue) {
  std::vector<int64_t> order(statistic.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return TopKKey(statistic[a], by) > TopKKey(statistic[b], by); });
  order.resize(std::clamp<int64_t>(k, 0, statistic.size()));
  std::sort(order.begin(), order.end());
  for (int64_t& i : order) i += begin;
  return order;
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
        ASSERT_EQ(StableSortSelection(v, 1000, k, by), optim::SelectTopK(statistic, 1000, k))
            << (by == TopKBy::kMagnitude ? "by magnitude" : "by value") << " trial " << trial
            << " k " << k;
      }
    }
  }
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
