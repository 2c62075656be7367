// The optimizer bodies run on the CPU against runtime/optim's optimizers:
// the same float operations in the same order, so every step must match
// bit for bit.
#include "runtime/kernels/cuda/optim_updates.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"
#include "runtime/optim/adams.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/in_process_rank_group.h"
#include "runtime/optim/optim_scalars.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::kernels::host_device {
namespace {

using cuda::RandomFloats;
using cuda::SameBits;
using optim::AdamSScalarsAt;
using optim::AdamWScalarsAt;
using optim::CatchUpPowerTables;
using optim::CatchUpPowerTablesOf;
using optim::kCatchUpCachedWindows;
using optim::ScapeCatchUpScalarsAt;
using optim::ScapeReferenceScalarsAt;

constexpr int64_t kSize = 900;
constexpr int kSteps = 8;

std::vector<uint8_t> DecayMask() {
  std::vector<uint8_t> d(kSize, 1);
  for (int64_t j = 120; j < 136; ++j) d[j] = 0;
  for (int64_t j = 400; j < 416; ++j) d[j] = 0;
  return d;
}

double Lr(int step) { return 0.01 * (1.0 + 0.1 * step); }

TEST(AdamWElement, MatchesAdamWStepBitwise) {
  optim::AdamConfig config;
  const std::vector<uint8_t> decays = DecayMask();
  optim::AdamW reference(config, decays);
  std::vector<float> ref_params = RandomFloats(kSize, 1), params = ref_params;
  std::vector<float> m(kSize, 0.0f), v(kSize, 0.0f);
  for (int step = 1; step <= kSteps; ++step) {
    const std::vector<float> g = RandomFloats(kSize, 100 + step, 0.1f);
    ASSERT_TRUE(reference.Step(ref_params.data(), g.data(), kSize, Lr(step)).ok());
    const AdamWScalars s = AdamWScalarsAt(config, step, Lr(step));
    for (int64_t i = 0; i < kSize; ++i) AdamWElement(params[i], m[i], v[i], g[i], decays[i] != 0, s);
    ASSERT_TRUE(SameBits(params, ref_params)) << "step " << step;
    ASSERT_TRUE(SameBits(m, reference.first_moment())) << "step " << step;
    ASSERT_TRUE(SameBits(v, reference.second_moment())) << "step " << step;
  }
}

TEST(AdamSElement, MatchesAdamSStepBitwise) {
  optim::AdamConfig config;
  config.weight_decay = 0.05;
  const std::vector<uint8_t> decays = DecayMask();
  optim::AdamS reference(config, decays);
  std::vector<float> ref_params = RandomFloats(kSize, 2), params = ref_params;
  std::vector<float> m(kSize, 0.0f);
  for (int step = 1; step <= kSteps; ++step) {
    const std::vector<float> g = RandomFloats(kSize, 200 + step, 0.1f);
    ASSERT_TRUE(reference.Step(ref_params.data(), g.data(), kSize, Lr(step)).ok());
    const AdamSScalars s = AdamSScalarsAt(config, Lr(step));
    for (int64_t i = 0; i < kSize; ++i) AdamSElement(params[i], m[i], g[i], decays[i] != 0, s);
    ASSERT_TRUE(SameBits(params, ref_params)) << "step " << step;
    ASSERT_TRUE(SameBits(m, reference.first_moment())) << "step " << step;
  }
}

TEST(ClipScale, MatchesClipGradientNorm) {
  for (double max_norm : {0.0, 0.5, 1e9}) {
    std::vector<float> ref = RandomFloats(500, 7), mine = ref;
    const double norm = optim::ClipGradientNorm(ref.data(), 500, max_norm);
    double sum = 0.0;
    for (float x : mine) sum += double{x} * x;
    const float scale = ClipScale(std::sqrt(sum), max_norm);
    if (scale != 1.0f) {
      for (float& x : mine) x *= scale;
    }
    EXPECT_EQ(std::sqrt(sum), norm);
    EXPECT_TRUE(SameBits(mine, ref)) << "max_norm " << max_norm;
  }
}

// SCAPE's reference rule over two in-process ranks: each rank's payload,
// packing, the summed values, reconstruction, clipping and the update,
// composed from the bodies, give the optimizer's θ, m and residuals bit
// for bit at every step (dense and masked).
TEST(ScapeReferenceBodies, MatchScapeOptimizerBitwise) {
  constexpr int kRanks = 2;
  const std::vector<int64_t> tensor_bounds = {0, 120, 136, 400, 416, 900};
  optim::ScapeConfig config;
  config.rule = optim::ScapeRule::kReference;
  config.density = 0.1;
  config.dense_warmup_steps = 2;  // two dense steps, then masks
  config.grad_clip = 0.05;        // binds on some steps
  const std::vector<uint8_t> decays = DecayMask();
  const std::vector<float> start = RandomFloats(kSize, 3, 0.5f);
  // grads[step][rank]: rank r's share of the step's mean gradient.
  std::vector<std::vector<std::vector<float>>> grads(kSteps);
  for (int t = 0; t < kSteps; ++t) {
    for (int r = 0; r < kRanks; ++r) grads[t].push_back(RandomFloats(kSize, 1000 + 10 * t + r, 0.05f));
  }
  struct Observed {
    std::vector<std::vector<float>> params, m, residual;
    std::vector<std::vector<int64_t>> mask;
    std::vector<bool> dense;
  };
  std::vector<Observed> seen(kRanks);
  absl::Status run = optim::RunInProcessRanks(kRanks, [&](int rank, optim::RankGroup& group) -> absl::Status {
    auto opt = optim::ScapeOptimizer::Create(&group, config, decays, tensor_bounds);
    if (!opt.ok()) return opt.status();
    std::vector<float> params = start;
    for (int t = 0; t < kSteps; ++t) {
      std::vector<float> g = grads[t][rank];
      if (absl::Status s = (*opt)->Step(params.data(), g.data(), kSize, Lr(t)); !s.ok()) return s;
      seen[rank].params.push_back(params);
      seen[rank].m.push_back((*opt)->first_moment());
      seen[rank].residual.push_back((*opt)->residual());
      seen[rank].mask.push_back((*opt)->current_mask().indices);
      seen[rank].dense.push_back((*opt)->last_step().dense);
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(run.ok()) << run;

  std::vector<float> theta = start, m(kSize, 0.0f);
  std::vector<std::vector<float>> residual(kRanks, std::vector<float>(kSize, 0.0f));
  int masked_steps = 0;
  for (int t = 0; t < kSteps; ++t) {
    const ScapeReferenceScalars s = ScapeReferenceScalarsAt(config.adams, t + 1, Lr(t), kRanks);
    std::vector<int64_t> mask = seen[0].mask[t];
    if (seen[0].dense[t]) {
      mask.resize(kSize);
      for (int64_t j = 0; j < kSize; ++j) mask[j] = j;
    } else {
      ++masked_steps;
      ASSERT_LT(mask.size(), static_cast<size_t>(kSize));
    }
    const int64_t count = static_cast<int64_t>(mask.size());
    std::vector<float> summed(count, 0.0f);
    for (int r = 0; r < kRanks; ++r) {
      for (int64_t j = 0; j < kSize; ++j) ScapePayloadElement(residual[r][j], m[j], grads[t][r][j], s);
      std::vector<float> values(count);
      for (int64_t p = 0; p < count; ++p) PackAtMaskElement(p, mask.data(), residual[r].data(), values.data());
      for (int64_t p = 0; p < count; ++p) summed[p] += values[p];  // two ranks: the order does not matter
    }
    for (int64_t p = 0; p < count; ++p) ScapeReconstructElement(summed[p], m[mask[p]], s);
    double sum_squares = 0.0;
    for (float x : summed) sum_squares += double{x} * x;
    const float scale = ClipScale(std::sqrt(sum_squares), config.grad_clip);
    if (scale != 1.0f) {
      for (float& x : summed) x *= scale;
    }
    std::vector<uint8_t> on(kSize, 0);
    for (int64_t j : mask) on[j] = 1;
    for (int64_t j = 0; j < kSize; ++j) {
      if (!on[j]) ScapeReferenceOffMask(theta[j], m[j], decays[j] != 0, s);
    }
    for (int64_t p = 0; p < count; ++p) {
      ScapeReferenceOnMask(theta[mask[p]], m[mask[p]], summed[p], decays[mask[p]] != 0, s);
    }
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(SameBits(theta, seen[r].params[t])) << "θ, step " << t << ", rank " << r;
      ASSERT_TRUE(SameBits(m, seen[r].m[t])) << "m, step " << t << ", rank " << r;
      ASSERT_TRUE(SameBits(residual[r], seen[r].residual[t])) << "residual, step " << t << ", rank " << r;
    }
  }
  EXPECT_EQ(masked_steps, kSteps - 2);
}

TEST(UnpackAtMaskElement, InvertsThePacking) {
  std::vector<float> residual = RandomFloats(50, 9), original = residual;
  const std::vector<int64_t> mask = {0, 3, 4, 17, 49};
  std::vector<float> values(mask.size()), dense(50, 0.0f);
  for (int64_t p = 0; p < 5; ++p) PackAtMaskElement(p, mask.data(), residual.data(), values.data());
  for (int64_t p = 0; p < 5; ++p) UnpackAtMaskElement(p, mask.data(), values.data(), dense.data());
  for (int64_t j = 0; j < 50; ++j) {
    const bool on = std::find(mask.begin(), mask.end(), j) != mask.end();
    EXPECT_EQ(dense[j], on ? original[j] : 0.0f) << j;
    EXPECT_EQ(residual[j], on ? 0.0f : original[j]) << j;
  }
}

// The ages kept beside the state, against a plain table of last steps:
// masks over several steps (one dense) give each entry the steps since its
// coordinate was last synchronized (never: since step −1), and the ages
// the optimizer's last_sync + 1.
TEST(StampSyncedElement, GivesTheWindowsSinceEachCoordinatesLastStep) {
  constexpr int64_t kCoordinates = 40;
  std::vector<int32_t> synced(kCoordinates, 0);  // zeroed: never
  std::vector<int64_t> last(kCoordinates, -1);
  const std::vector<std::vector<int64_t>> masks = {{1, 5, 9}, {}, {0, 5, 39}, {5, 9, 10, 11}};
  for (int64_t t = 0; t < 6; ++t) {
    const bool dense = t == 4;
    const std::vector<int64_t>& mask = dense ? std::vector<int64_t>{} : masks[t % masks.size()];
    const int64_t count = dense ? kCoordinates : static_cast<int64_t>(mask.size());
    std::vector<int32_t> windows(count, -7);
    for (int64_t p = 0; p < count; ++p) {
      StampSyncedElement(p, dense ? nullptr : mask.data(), static_cast<int32_t>(t + 1),
                         synced.data(), windows.data());
    }
    for (int64_t p = 0; p < count; ++p) {
      const int64_t j = dense ? p : mask[p];
      ASSERT_EQ(windows[p], t - last[j]) << "step " << t << ", coordinate " << j;
      last[j] = t;
    }
    for (int64_t j = 0; j < kCoordinates; ++j) ASSERT_EQ(synced[j], last[j] + 1) << j;
  }
  // Without windows only the ages move.
  StampSyncedElement(0, masks[0].data(), 9, synced.data(), nullptr);
  EXPECT_EQ(synced[1], 9);
}

// A value covering one step is AdamS: the catch-up body at K = 1 gives
// AdamSElement's bits.
TEST(ScapeCatchUpOnMask, IsAdamSForAWindowOfOneStep) {
  optim::AdamConfig config;
  const ScapeCatchUpScalars s = ScapeCatchUpScalarsAt(config, 0.01, 0.95, false);
  const AdamSScalars adams = AdamSScalarsAt(config, 0.01);
  const CatchUpPowerTables tables = CatchUpPowerTablesOf(config.beta1, 0.65, kCatchUpCachedWindows);
  const std::vector<float> g = RandomFloats(kSize, 3, 0.1f), m0 = RandomFloats(kSize, 4, 0.05f),
                           theta0 = RandomFloats(kSize, 5);
  for (int64_t j = 0; j < kSize; ++j) {
    float theta = theta0[j], m = m0[j], vbar = 0.0f;
    const float b = (1.0f - s.beta1) * g[j];  // one step's payload
    ScapeCatchUpOnMask(theta, m, vbar, b, 1, CatchUpBeta1Power(1, tables.OnHost()),
                       CatchUpSteps(1, tables.OnHost()), s);
    float theta_adams = theta0[j], m_adams = m0[j];
    AdamSElement(theta_adams, m_adams, b / (1.0f - s.beta1), false, adams);
    ASSERT_EQ(theta, theta_adams) << j;
    ASSERT_EQ(m, m_adams) << j;
  }
}

// K > 1 against the catch-up equations in double (docs/scape.md): the mean
// gradient ĝ = b/((1−β1)K), m ← β1^K·m + (1−β1^K)·ĝ, θ ← θ − η·K^α·m/(√v+ε)
// with v = β2·m_prev² + (1−β2)·ĝ², v̄ ← ρ·v̄ + (1−ρ)·v. Windows past the
// tables take pow.
TEST(ScapeCatchUpOnMask, MatchesTheCatchUpEquations) {
  optim::AdamConfig config;
  const ScapeCatchUpScalars s = ScapeCatchUpScalarsAt(config, 0.01, 0.9, false);
  const CatchUpPowerTables tables = CatchUpPowerTablesOf(config.beta1, 0.65, 64);
  for (int64_t k : {2, 7, 63, 64, 300}) {
    const double b = 0.013, m0 = -0.004, vbar0 = 2e-5, theta0 = 0.3, b1 = config.beta1;
    const double b1k = std::pow(b1, static_cast<double>(k));
    const double g_hat = b / ((1.0 - b1) * k);
    const double v = config.beta2 * m0 * m0 + (1.0 - config.beta2) * g_hat * g_hat;
    const double m1 = b1k * m0 + (1.0 - b1k) * g_hat;
    const double theta1 =
        theta0 - 0.01 * std::pow(static_cast<double>(k), 0.65) * m1 / (std::sqrt(v) + config.epsilon);
    float theta = static_cast<float>(theta0), m = static_cast<float>(m0),
          vbar = static_cast<float>(vbar0);
    ScapeCatchUpOnMask(theta, m, vbar, static_cast<float>(b), k, CatchUpBeta1Power(k, tables.OnHost()),
                       CatchUpSteps(k, tables.OnHost()), s);
    EXPECT_NEAR(m, m1, 1e-5 * std::fabs(m1)) << "K = " << k;
    EXPECT_NEAR(vbar, 0.9 * vbar0 + 0.1 * v, 1e-5 * vbar0) << "K = " << k;
    EXPECT_NEAR(theta, theta1, 1e-6) << "K = " << k;
  }
}

TEST(MaskStatisticElement, MatchesEachStatisticsDefinition) {
  const MaskStatisticScalars s{0.9f, 1e-8f, 4.0f};
  const float m = -0.3f, e = 0.05f, v = 0.0004f;
  EXPECT_FLOAT_EQ(MaskStatisticElement(MaskStatistic::kMomentumPlusResidual, m, e, v, s),
                  std::fabs(0.9f * m + e));
  EXPECT_FLOAT_EQ(MaskStatisticElement(MaskStatistic::kResidual, m, -e, v, s), e);
  EXPECT_FLOAT_EQ(MaskStatisticElement(MaskStatistic::kMomentum, m, e, v, s), 0.3f);
  EXPECT_FLOAT_EQ(MaskStatisticElement(MaskStatistic::kNormalizedResidual, m, e, v, s),
                  e / (0.02f + 1e-8f));
  EXPECT_FLOAT_EQ(MaskStatisticElement(MaskStatistic::kMomentumPlusScaledResidual, m, e, v, s),
                  std::fabs(0.9f * m + 4.0f * e));
}

TEST(ScapeAccumulateElement, AddsTheIncrement) {
  optim::AdamConfig config;
  const ScapeCatchUpScalars s = ScapeCatchUpScalarsAt(config, 0.01, 0.9, false);
  float e = 0.5f;
  ScapeAccumulateElement(e, 2.0f, s);
  EXPECT_FLOAT_EQ(e, 0.5f + 0.1f * 2.0f);
}

}  // namespace
}  // namespace corescape::kernels::host_device
