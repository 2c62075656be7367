// Embedding bodies on the CPU vs runtime/kernels/cpu/embedding, bitwise,
// with repeated tokens (the backward sums them in row order).
#include "runtime/kernels/cuda/embedding.h"

#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/embedding.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"

namespace corescape::kernels::cuda {
namespace {

TEST(EmbeddingBodies, MatchTheCpuKernelBitwise) {
  const int64_t vocab = 11, dim = 24;
  const std::vector<int32_t> tokens = {3, 0, 3, 10, 3, 7, 7, 1, 0, 3};
  const int64_t rows = static_cast<int64_t>(tokens.size());
  const std::vector<float> table = RandomFloats(vocab * dim, 1);
  std::vector<float> out_ref(rows * dim), out(rows * dim);
  EmbeddingForward(tokens.data(), table.data(), out_ref.data(), rows, dim);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dim; ++i) EmbeddingForwardElement(tokens.data(), table.data(), out.data(), r, i, dim);
  }
  EXPECT_TRUE(SameBits(out, out_ref));

  const std::vector<float> d_out = RandomFloats(rows * dim, 2);
  std::vector<float> d_table_ref = RandomFloats(vocab * dim, 3), d_table = d_table_ref;
  EmbeddingBackward(tokens.data(), d_out.data(), d_table_ref.data(), rows, dim);
  for (int64_t i = 0; i < dim; ++i) {
    EmbeddingBackwardColumn(tokens.data(), d_out.data(), d_table.data(), i, rows, dim);
  }
  EXPECT_TRUE(SameBits(d_table, d_table_ref));

  // Split into token classes (the launch's warps), in any order of classes:
  // still the CPU's bits.
  for (int32_t classes : {2, 8}) {
    std::vector<float> by_class = RandomFloats(vocab * dim, 3);
    for (int32_t c = classes - 1; c >= 0; --c) {
      for (int64_t i = 0; i < dim; ++i) {
        EmbeddingBackwardColumn(tokens.data(), d_out.data(), by_class.data(), i, rows, dim, c, classes);
      }
    }
    EXPECT_TRUE(SameBits(by_class, d_table_ref)) << classes << " classes";
  }
}

}  // namespace
}  // namespace corescape::kernels::cuda
