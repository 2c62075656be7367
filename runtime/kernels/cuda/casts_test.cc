// bf16 casts against an independent reference: the nearest bf16 found by
// comparing distances in double (ties to the even mantissa), over every
// bf16 value, every halfway point between neighbours and random floats.
#include "runtime/kernels/cuda/casts.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "gtest/gtest.h"

namespace corescape::kernels::cuda {
namespace {

// The value of a non-NaN bf16 as a double; the pattern past the largest
// finite one (0x7F80, inf) stands for 2^128, where IEEE rounding places it.
double Bf16Value(uint16_t h) {
  if ((h & 0x7FFF) == 0x7F80) return (h & 0x8000 ? -1.0 : 1.0) * std::ldexp(1.0, 128);
  return static_cast<double>(FloatFromBf16(h));
}

uint16_t ReferenceRound(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint16_t low = static_cast<uint16_t>(bits >> 16);  // truncation: toward zero
  if ((bits & 0xFFFF) == 0) return low;
  const uint16_t high = static_cast<uint16_t>(low + 1);    // next away from zero
  const double dl = std::fabs(static_cast<double>(x) - Bf16Value(low));
  const double dh = std::fabs(Bf16Value(high) - static_cast<double>(x));
  if (dl < dh) return low;
  if (dh < dl) return high;
  return (low & 1) == 0 ? low : high;
}

TEST(Bf16Casts, EveryBf16RoundTripsExactly) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = FloatFromBf16(static_cast<uint16_t>(h));
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    ASSERT_EQ(bits, h << 16) << std::hex << h;
    const uint16_t back = Bf16FromFloat(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(FloatFromBf16(back))) << std::hex << h;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << "NaN keeps its sign: " << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(Bf16Casts, RoundsToNearestEvenAtEveryHalfwayPoint) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    if ((h & 0x7FFF) >= 0x7F80) continue;  // inf and NaN have no upper neighbour
    for (uint32_t low : {0x7FFFu, 0x8000u, 0x8001u, 0x0001u, 0xFFFFu}) {
      const uint32_t bits = (h << 16) | low;
      float x;
      std::memcpy(&x, &bits, 4);
      ASSERT_EQ(Bf16FromFloat(x), ReferenceRound(x)) << std::hex << bits;
    }
  }
}

TEST(Bf16Casts, MatchesTheReferenceOnRandomFloats) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    float x;
    std::memcpy(&x, &bits, 4);
    if (std::isnan(x)) continue;
    ASSERT_EQ(Bf16FromFloat(x), ReferenceRound(x)) << std::hex << bits;
  }
}

TEST(Bf16Casts, NaNStaysNaNAndOverflowGoesToInfinity) {
  // NaNs whose payload sits only in the low half, or would carry into the
  // exponent on rounding.
  for (uint32_t bits : {0x7F800001u, 0x7FFFFFFFu, 0xFF800001u, 0x7FC00000u, 0xFFFFFFFFu}) {
    float x;
    std::memcpy(&x, &bits, 4);
    const uint16_t h = Bf16FromFloat(x);
    EXPECT_TRUE(std::isnan(FloatFromBf16(h))) << std::hex << bits << " -> " << h;
    EXPECT_EQ(h & 0x8000, (bits >> 16) & 0x8000) << std::hex << bits;
  }
  EXPECT_EQ(Bf16FromFloat(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(Bf16FromFloat(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(Bf16FromFloat(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(Bf16FromFloat(-0.0f), 0x8000);
  EXPECT_EQ(Bf16FromFloat(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even, i.e. 1.
  EXPECT_EQ(Bf16FromFloat(1.00390625f), 0x3F80);
  EXPECT_EQ(Bf16FromFloat(1.01171875f), 0x3F82);  // 1 + 3·2^-8: up, to even
}

}  // namespace
}  // namespace corescape::kernels::cuda
