// The reduction kernels against naive scalar loops, bitwise: every length
// around the vector width, unaligned starts, and `out` aliasing either input.
#include "runtime/comm/reduce_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace corescape::comm {
namespace {

std::vector<float> Input(int seed, int64_t n) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = unit(gen) * std::pow(10.0f, static_cast<float>(gen() % 9) - 4.0f);
  }
  if (n > 5) v[5] = std::numeric_limits<float>::infinity();
  if (n > 9) v[9] = std::numeric_limits<float>::denorm_min();
  return v;
}

// Equal bits, or both NaN (which NaN an addition returns is the hardware's
// choice, not the kernel's).
bool SameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

enum class Alias { kNone, kFirst, kSecond };

TEST(ReduceKernelsTest, MatchNaiveLoopsBitwise) {
  for (int64_t n : {0, 1, 3, 4, 15, 16, 17, 31, 33, 64, 1000, 1027}) {
    for (int shift : {0, 1, 3}) {  // start off a 16-byte boundary
      for (Alias alias : {Alias::kNone, Alias::kFirst, Alias::kSecond}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " shift=" << shift
                                        << " alias=" << static_cast<int>(alias));
        const std::vector<float> a0 = Input(1, n + shift), b0 = Input(2, n + shift);
        const float* a = a0.data() + shift;
        const float* b = b0.data() + shift;
        std::vector<float> sum(n), mean(n), divided(n);
        for (int64_t i = 0; i < n; ++i) {
          sum[i] = a[i] + b[i];
          mean[i] = (a[i] + b[i]) / 3.0f;
          divided[i] = a[i] / 3.0f;
        }
        // Fresh copies for each kernel, aliased as the case says.
        auto run = [&](auto kernel) {
          std::vector<float> x(a0), y(b0), z(n + shift, -7.0f);
          float* first = x.data() + shift;
          float* second = y.data() + shift;
          float* out = alias == Alias::kFirst    ? first
                       : alias == Alias::kSecond ? second
                                                 : z.data() + shift;
          kernel(first, second, out);
          return std::vector<float>(out, out + n);
        };
        const std::vector<float> got_sum =
            run([&](const float* x, const float* y, float* o) { AddFloats(x, y, o, n); });
        const std::vector<float> got_mean = run([&](const float* x, const float* y, float* o) {
          AddThenDivideFloats(x, y, o, n, 3.0f);
        });
        std::vector<float> got_divided(a, a + n);
        DivideFloats(got_divided.data(), n, 3.0f);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(SameFloat(got_sum[i], sum[i])) << i << ": " << got_sum[i] << " vs " << sum[i];
          ASSERT_TRUE(SameFloat(got_mean[i], mean[i])) << i;
          ASSERT_TRUE(SameFloat(got_divided[i], divided[i])) << i;
        }
      }
    }
  }
}

TEST(ReduceKernelsTest, InfinitiesOfOppositeSignGiveNaN) {
  std::vector<float> a(40, std::numeric_limits<float>::infinity());
  std::vector<float> b(40, -std::numeric_limits<float>::infinity());
  AddFloats(a.data(), b.data(), a.data(), 40);
  for (float x : a) EXPECT_TRUE(std::isnan(x));
}

}  // namespace
}  // namespace corescape::comm
