// The cuBLAS linear layer vs the CPU linear kernel on the same
// bf16-rounded inputs. Both accumulate in fp32 but in different orders, so
// each entry may differ by about k·2^-24 times the sum of |products|; the
// test allows 4× that (plus an absolute 1e-6 for entries near zero).
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/linear.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"
#include "runtime/kernels/cuda/casts.h"
#include "runtime/kernels/cuda/gemm.h"
#include "runtime/kernels/cuda/gpu_test_util.h"

namespace corescape::kernels::cuda {
namespace {

using GemmGpuTest = GpuTest;

struct Bf16Tensor {
  std::vector<uint16_t> bits;
  std::vector<float> values;  // the same numbers as fp32
};

Bf16Tensor RandomBf16(size_t n, uint32_t seed) {
  Bf16Tensor t;
  for (float x : RandomFloats(n, seed)) {
    t.bits.push_back(Bf16FromFloat(x));
    t.values.push_back(FloatFromBf16(t.bits.back()));
  }
  return t;
}

// |a|·|b| products summed, the scale of each entry's rounding error.
void ExpectWithinAccumulationError(const std::vector<float>& got, const std::vector<float>& want,
                                   const std::vector<float>& magnitude, int64_t k) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = 4.0 * k * std::ldexp(1.0, -24) * magnitude[i] + 1e-6;
    ASSERT_NEAR(got[i], want[i], bound) << "entry " << i;
  }
}

std::vector<float> Abs(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

TEST_F(GemmGpuTest, LinearForwardAndBackwardMatchTheCpuKernel) {
  const int64_t m = 96, k = 320, n = 200;
  const Bf16Tensor x = RandomBf16(m * k, 1), w = RandomBf16(n * k, 2), dy = RandomBf16(m * n, 3);
  auto handle = CublasHandle::Create();
  ASSERT_TRUE(handle.ok()) << handle.status();
  auto x_dev = Upload(x.bits), w_dev = Upload(w.bits), dy_dev = Upload(dy.bits);
  auto y_dev = Zeros<float>(m * n), dx_dev = Zeros<float>(m * k);
  const std::vector<float> dw_start = RandomFloats(n * k, 4);
  auto dw_dev = Upload(dw_start);

  std::vector<float> y(m * n), dx(m * k), dw = dw_start;
  LinearForward(x.values.data(), w.values.data(), y.data(), m, k, n);
  LinearBackward(x.values.data(), w.values.data(), dy.values.data(), dx.data(), dw.data(), m, k, n);
  ASSERT_TRUE(LinearForwardBf16(**handle, x_dev.as<uint16_t>(), w_dev.as<uint16_t>(), y_dev.as<float>(), m, k, n,
                                stream())
                  .ok());
  ASSERT_TRUE(LinearBackwardBf16(**handle, x_dev.as<uint16_t>(), w_dev.as<uint16_t>(), dy_dev.as<uint16_t>(),
                                 dx_dev.as<float>(), dw_dev.as<float>(), m, k, n, stream())
                  .ok());
  // The error scales: the same products with absolute values.
  std::vector<float> y_mag(m * n), dx_mag(m * k), dw_mag(n * k, 0.0f);
  const std::vector<float> ax = Abs(x.values), aw = Abs(w.values), ady = Abs(dy.values);
  LinearForward(ax.data(), aw.data(), y_mag.data(), m, k, n);
  LinearBackward(ax.data(), aw.data(), ady.data(), dx_mag.data(), dw_mag.data(), m, k, n);
  for (size_t i = 0; i < dw_mag.size(); ++i) dw_mag[i] += std::fabs(dw_start[i]);
  ExpectWithinAccumulationError(Download<float>(y_dev, m * n), y, y_mag, k);
  ExpectWithinAccumulationError(Download<float>(dx_dev, m * k), dx, dx_mag, n);
  ExpectWithinAccumulationError(Download<float>(dw_dev, n * k), dw, dw_mag, m);
}

TEST_F(GemmGpuTest, RefusesBadShapes) {
  auto handle = CublasHandle::Create();
  ASSERT_TRUE(handle.ok()) << handle.status();
  const absl::Status s = LinearForwardBf16(**handle, nullptr, nullptr, nullptr, 0, 4, 4, stream());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("m=0"), std::string::npos) << s;
}

}  // namespace
}  // namespace corescape::kernels::cuda
