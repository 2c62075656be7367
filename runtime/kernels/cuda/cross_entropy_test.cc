// The cross-entropy row body on the CPU vs runtime/kernels/cpu/cross_entropy:
// loss sum (double), token count and d_logits bitwise, with ignored rows and
// a row whose maximum repeats.
#include "runtime/kernels/cuda/cross_entropy.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"

namespace corescape::kernels::cuda {
namespace {

TEST(CrossEntropyRow, MatchesTheCpuKernelBitwise) {
  const int64_t rows = 6, vocab = 301;
  std::vector<float> logits = RandomFloats(rows * vocab, 1, 5.0f);
  logits[2 * vocab + 4] = logits[2 * vocab + 9] = 40.0f;  // a repeated maximum
  const std::vector<int32_t> targets = {5, -1, 9, 300, -1, 0};
  const float grad_scale = 1.0f / 4;
  std::vector<float> dz_ref(rows * vocab), dz(rows * vocab, 3.0f);
  const CrossEntropyResult ref =
      CrossEntropy(logits.data(), targets.data(), rows, vocab, dz_ref.data(), grad_scale);
  double loss_sum = 0.0;
  int64_t tokens = 0;
  for (int64_t r = 0; r < rows; ++r) {
    bool counted = false;
    const double loss =
        CrossEntropyRow(logits.data() + r * vocab, targets[r], vocab, dz.data() + r * vocab, grad_scale, &counted);
    EXPECT_EQ(counted, targets[r] >= 0);
    if (counted) {
      loss_sum += loss;
      ++tokens;
    }
  }
  EXPECT_EQ(tokens, ref.tokens);
  EXPECT_EQ(std::memcmp(&loss_sum, &ref.loss_sum, sizeof(double)), 0) << loss_sum << " vs " << ref.loss_sum;
  EXPECT_TRUE(SameBits(dz, dz_ref));

  // Without d_logits only the loss.
  bool counted = false;
  const double loss = CrossEntropyRow(logits.data(), targets[0], vocab, nullptr, grad_scale, &counted);
  EXPECT_TRUE(counted);
  EXPECT_GT(loss, 0.0);
}

}  // namespace
}  // namespace corescape::kernels::cuda
