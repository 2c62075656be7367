// SwiGLU element bodies on the CPU vs runtime/kernels/cpu/swiglu, bitwise,
// including gates large enough to overflow exp.
#include "runtime/kernels/cuda/swiglu.h"

#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/swiglu.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"

namespace corescape::kernels::cuda {
namespace {

TEST(SwiGluBodies, MatchTheCpuKernelBitwise) {
  std::vector<float> gate = RandomFloats(1000, 1, 4.0f);
  gate[0] = 100.0f;
  gate[1] = -100.0f;
  gate[2] = 0.0f;
  const std::vector<float> up = RandomFloats(1000, 2), d_h = RandomFloats(1000, 3);
  const int64_t n = 1000;
  std::vector<float> h_ref(n), h(n), dg_ref(n), du_ref(n), dg(n), du(n);
  SwiGluForward(gate.data(), up.data(), h_ref.data(), n);
  SwiGluBackward(gate.data(), up.data(), d_h.data(), dg_ref.data(), du_ref.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    h[i] = SwiGluForwardElement(gate[i], up[i]);
    SwiGluBackwardElement(gate[i], up[i], d_h[i], dg[i], du[i]);
  }
  EXPECT_TRUE(SameBits(h, h_ref));
  EXPECT_TRUE(SameBits(dg, dg_ref));
  EXPECT_TRUE(SameBits(du, du_ref));
}

}  // namespace
}  // namespace corescape::kernels::cuda
