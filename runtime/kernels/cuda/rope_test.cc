// The RoPE pair body on the CPU vs runtime/kernels/cpu/rope, bitwise, with
// positions up to 10^5 (where the double angle matters).
#include "runtime/kernels/cuda/rope.h"

#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/rope.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"

namespace corescape::kernels::cuda {
namespace {

TEST(RopeBody, MatchesTheCpuKernelBitwise) {
  const int64_t rows = 9;
  const int heads = 3, head_dim = 16;
  const std::vector<int32_t> positions = {0, 1, 2, 100, 4095, 4096, 65535, 100000, 131071};
  for (double direction : {1.0, -1.0}) {
    std::vector<float> ref = RandomFloats(rows * heads * head_dim, 8), mine = ref;
    if (direction > 0) {
      RopeForward(ref.data(), positions.data(), rows, heads, head_dim, 500000.0);
    } else {
      RopeBackward(ref.data(), positions.data(), rows, heads, head_dim, 500000.0);
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < head_dim / 2; ++i) {
          RopeRotatePair(mine.data() + (r * heads + h) * head_dim, i, head_dim, positions[r], 500000.0, direction);
        }
      }
    }
    EXPECT_TRUE(SameBits(mine, ref)) << "direction " << direction;
  }
}

}  // namespace
}  // namespace corescape::kernels::cuda
