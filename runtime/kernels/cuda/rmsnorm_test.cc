// RMSNorm row bodies on the CPU vs runtime/kernels/cpu/rmsnorm: same
// operation order, bitwise.
#include "runtime/kernels/cuda/rmsnorm.h"

#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/rmsnorm.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"

namespace corescape::kernels::cuda {
namespace {

TEST(RmsNormBodies, MatchTheCpuKernelBitwise) {
  for (int64_t dim : {1, 7, 64, 257}) {
    const int64_t rows = 13;
    const std::vector<float> x = RandomFloats(rows * dim, 1, 3.0f);
    const std::vector<float> w = RandomFloats(dim, 2);
    const std::vector<float> dy = RandomFloats(rows * dim, 3);
    std::vector<float> y_ref(rows * dim), rstd_ref(rows), y(rows * dim), rstd(rows);
    RmsNormForward(x.data(), w.data(), y_ref.data(), rstd_ref.data(), rows, dim, 1e-5f);
    for (int64_t r = 0; r < rows; ++r) {
      rstd[r] = RmsNormForwardRow(x.data() + r * dim, w.data(), y.data() + r * dim, dim, 1e-5f);
    }
    ASSERT_TRUE(SameBits(y, y_ref)) << "dim " << dim;
    ASSERT_TRUE(SameBits(rstd, rstd_ref)) << "dim " << dim;

    // Both accumulate into what is already there.
    std::vector<float> dx_ref = RandomFloats(rows * dim, 4), dx = dx_ref;
    std::vector<float> dw_ref = RandomFloats(dim, 5), dw = dw_ref;
    RmsNormBackward(x.data(), w.data(), rstd_ref.data(), dy.data(), dx_ref.data(), dw_ref.data(), rows, dim);
    for (int64_t r = 0; r < rows; ++r) {
      RmsNormBackwardRow(x.data() + r * dim, w.data(), rstd[r], dy.data() + r * dim, dx.data() + r * dim, dim);
    }
    for (int64_t i = 0; i < dim; ++i) {
      RmsNormWeightGradColumn(x.data(), rstd.data(), dy.data(), dw.data(), i, rows, dim);
    }
    EXPECT_TRUE(SameBits(dx, dx_ref)) << "dim " << dim;
    EXPECT_TRUE(SameBits(dw, dw_ref)) << "dim " << dim;
  }
}

}  // namespace
}  // namespace corescape::kernels::cuda
