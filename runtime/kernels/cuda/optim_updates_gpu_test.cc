// The optimizer launches on the GPU vs runtime/optim and the bodies on the
// CPU. Built with --fmad=false and IEEE sqrt/division, the updates match
// bit for bit; only the clipping norm (an atomic double sum, in no fixed
// order) is compared with a tolerance.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"
#include "runtime/kernels/cuda/gpu_test_util.h"
#include "runtime/kernels/cuda/mask_bits.h"
#include "runtime/kernels/cuda/mask_bits_cuda.h"
#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/kernels/cuda/optim_updates_cuda.h"
#include "runtime/optim/adams.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/optim_scalars.h"

namespace corescape::kernels::cuda {

using host_device::ClipScale;
using host_device::PackAtMaskElement;
using host_device::ScapePayloadElement;
using host_device::ScapeReconstructElement;
using host_device::ScapeReferenceOffMask;
using host_device::ScapeReferenceOnMask;
using host_device::ScapeReferenceScalars;
using host_device::StampSyncedElement;

namespace {

using optim::AdamSScalarsAt;
using optim::AdamWScalarsAt;
using optim::ScapeReferenceScalarsAt;

constexpr int64_t kN = 100003;  // not a multiple of a block

std::vector<uint8_t> Decays() {
  std::vector<uint8_t> d(kN, 1);
  for (int64_t j = 0; j < kN; j += 97) d[j] = 0;
  return d;
}

using OptimGpuTest = GpuTest;

TEST_F(OptimGpuTest, AdamWMatchesTheCpuOptimizerBitwise) {
  optim::AdamConfig config;
  const std::vector<uint8_t> decays = Decays();
  optim::AdamW reference(config, decays);
  std::vector<float> params = RandomFloats(kN, 1);
  auto theta = Upload(params), m = Zeros<float>(kN), v = Zeros<float>(kN), d = Upload(decays);
  for (int step = 1; step <= 4; ++step) {
    const std::vector<float> g = RandomFloats(kN, 10 + step, 0.1f);
    auto g_dev = Upload(g);
    ASSERT_TRUE(reference.Step(params.data(), g.data(), kN, 1e-3 * step).ok());
    ASSERT_TRUE(LaunchAdamW(theta.as<float>(), m.as<float>(), v.as<float>(), g_dev.as<float>(),
                            d.as<uint8_t>(), kN, AdamWScalarsAt(config, step, 1e-3 * step), stream())
                    .ok());
    ASSERT_TRUE(SameBits(Download<float>(theta, kN), params)) << "step " << step;
    ASSERT_TRUE(SameBits(Download<float>(m, kN), reference.first_moment()));
    ASSERT_TRUE(SameBits(Download<float>(v, kN), reference.second_moment()));
  }
}

TEST_F(OptimGpuTest, AdamSMatchesTheCpuOptimizerBitwise) {
  optim::AdamConfig config;
  const std::vector<uint8_t> decays = Decays();
  optim::AdamS reference(config, decays);
  std::vector<float> params = RandomFloats(kN, 2);
  auto theta = Upload(params), m = Zeros<float>(kN), d = Upload(decays);
  for (int step = 1; step <= 4; ++step) {
    const std::vector<float> g = RandomFloats(kN, 20 + step, 0.1f);
    auto g_dev = Upload(g);
    ASSERT_TRUE(reference.Step(params.data(), g.data(), kN, 1e-3 * step).ok());
    ASSERT_TRUE(LaunchAdamS(theta.as<float>(), m.as<float>(), g_dev.as<float>(), d.as<uint8_t>(), kN,
                            AdamSScalarsAt(config, 1e-3 * step), stream())
                    .ok());
    ASSERT_TRUE(SameBits(Download<float>(theta, kN), params)) << "step " << step;
    ASSERT_TRUE(SameBits(Download<float>(m, kN), reference.first_moment()));
  }
}

// One SCAPE reference step of one rank (P = 1) on the device vs the bodies
// on the CPU.
TEST_F(OptimGpuTest, ScapeReferenceStepMatchesTheBodiesOnTheCpu) {
  optim::AdamConfig config;
  const std::vector<uint8_t> decays = Decays();
  const ScapeReferenceScalars s = ScapeReferenceScalarsAt(config, 3, 1e-3, 1);
  std::vector<float> theta = RandomFloats(kN, 3), m = RandomFloats(kN, 4, 0.01f);
  std::vector<float> residual = RandomFloats(kN, 5, 0.01f);
  const std::vector<float> g = RandomFloats(kN, 6, 0.1f);
  std::vector<int64_t> mask;
  for (int64_t j = 3; j < kN; j += 11) mask.push_back(j);
  const int64_t count = static_cast<int64_t>(mask.size());
  auto theta_dev = Upload(theta), m_dev = Upload(m), e_dev = Upload(residual), g_dev = Upload(g);
  auto mask_dev = Upload(mask), d_dev = Upload(decays), values_dev = Zeros<float>(count);
  auto words_dev = Zeros<uint32_t>(MaskWords(kN)), norm_dev = Zeros<double>(kClipSumBlocks + 1);

  // CPU, the bodies.
  std::vector<float> values(count);
  for (int64_t j = 0; j < kN; ++j) ScapePayloadElement(residual[j], m[j], g[j], s);
  for (int64_t p = 0; p < count; ++p) PackAtMaskElement(p, mask.data(), residual.data(), values.data());
  for (int64_t p = 0; p < count; ++p) ScapeReconstructElement(values[p], m[mask[p]], s);
  const std::vector<float> g_hat = values;

  // Device, up to ĝ: bitwise.
  ASSERT_TRUE(LaunchScapePayload(e_dev.as<float>(), m_dev.as<float>(), g_dev.as<float>(), kN, s, stream()).ok());
  ASSERT_TRUE(LaunchPackAtMask(mask_dev.as<int64_t>(), count, e_dev.as<float>(), values_dev.as<float>(), stream()).ok());
  ASSERT_TRUE(LaunchScapeReconstruct(values_dev.as<float>(), mask_dev.as<int64_t>(), count, m_dev.as<float>(), s,
                                     stream())
                  .ok());
  ASSERT_TRUE(SameBits(Download<float>(e_dev, kN), residual));
  ASSERT_TRUE(SameBits(Download<float>(values_dev, count), g_hat));

  // Clipping: the norm's summation order differs, so within 1e-6 relative
  // (a double sum of 9,000 squares is exact to ~1e-12; the float scale then
  // differs by at most one ulp, 6e-8 relative).
  const double max_norm = 0.05;
  double sum = 0.0;
  for (float x : values) sum += double{x} * x;
  const float scale = ClipScale(std::sqrt(sum), max_norm);
  ASSERT_LT(scale, 1.0f) << "the test wants clipping to bind";
  for (float& x : values) x *= scale;
  ASSERT_TRUE(LaunchClipByGlobalNorm(values_dev.as<float>(), count, max_norm, norm_dev.as<double>(), stream()).ok());
  const std::vector<float> clipped = Download<float>(values_dev, count);
  EXPECT_NEAR(Download<double>(norm_dev, kClipSumBlocks + 1)[kClipSumBlocks], sum, 1e-12 * sum);
  for (int64_t p = 0; p < count; ++p) {
    ASSERT_NEAR(clipped[p], values[p], 1e-6 * std::fabs(values[p]) + 1e-30) << p;
  }

  // The update from the CPU's ĝ: bitwise.
  auto ghat_dev = Upload(values);
  for (int64_t j = 0, p = 0; j < kN; ++j) {
    if (p < count && mask[p] == j) {
      ScapeReferenceOnMask(theta[j], m[j], values[p], decays[j] != 0, s);
      ++p;
    } else {
      ScapeReferenceOffMask(theta[j], m[j], decays[j] != 0, s);
    }
  }
  ASSERT_TRUE(LaunchSetMaskBits(mask_dev.as<int64_t>(), count, 0, kN, words_dev.as<uint32_t>(), stream()).ok());
  ASSERT_TRUE(LaunchScapeReferenceApply(theta_dev.as<float>(), m_dev.as<float>(), ghat_dev.as<float>(),
                                        mask_dev.as<int64_t>(), count, words_dev.as<uint32_t>(), d_dev.as<uint8_t>(),
                                        kN, s, stream())
                  .ok());
  EXPECT_TRUE(SameBits(Download<float>(theta_dev, kN), theta));
  EXPECT_TRUE(SameBits(Download<float>(m_dev, kN), m));

  // Unpacking scatters the values back.
  auto dense_dev = Zeros<float>(kN);
  ASSERT_TRUE(LaunchUnpackAtMask(mask_dev.as<int64_t>(), count, ghat_dev.as<float>(), dense_dev.as<float>(), stream()).ok());
  const std::vector<float> dense = Download<float>(dense_dev, kN);
  for (int64_t p = 0; p < count; ++p) ASSERT_EQ(dense[mask[p]], values[p]);
}

// The ages on the device: the launch gives the body's windows and ages on
// the CPU, over a sparse mask and then a dense step (null mask).
TEST_F(OptimGpuTest, StampSyncedMatchesTheBodyOnTheCpu) {
  std::vector<int32_t> synced(kN, 0);
  for (int64_t j = 0; j < kN; j += 3) synced[j] = static_cast<int32_t>(j % 5);
  std::vector<int64_t> mask;
  for (int64_t j = 1; j < kN; j += 7) mask.push_back(j);
  auto synced_dev = Upload(synced), mask_dev = Upload(mask);
  for (const bool dense : {false, true}) {
    const int64_t count = dense ? kN : static_cast<int64_t>(mask.size());
    const int32_t stamp = dense ? 12 : 6;
    std::vector<int32_t> windows(count);
    for (int64_t p = 0; p < count; ++p) {
      StampSyncedElement(p, dense ? nullptr : mask.data(), stamp, synced.data(), windows.data());
    }
    auto windows_dev = Zeros<int32_t>(count);
    ASSERT_TRUE(LaunchStampSynced(dense ? nullptr : mask_dev.as<int64_t>(), count, stamp,
                                  synced_dev.as<int32_t>(), windows_dev.as<int32_t>(), stream())
                    .ok());
    EXPECT_EQ(Download<int32_t>(windows_dev, count), windows) << (dense ? "dense" : "sparse");
    EXPECT_EQ(Download<int32_t>(synced_dev, kN), synced) << (dense ? "dense" : "sparse");
  }
}

}  // namespace
}  // namespace corescape::kernels::cuda
