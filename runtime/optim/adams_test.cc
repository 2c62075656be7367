// AdamS against a naive double-precision implementation and against an
// independent PyTorch one (adams_reference.py, float64).
#include "runtime/optim/adams.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace corescape::optim {
namespace {

struct Problem {
  int n = 257;
  int steps = 12;
  std::vector<float> params;
  std::vector<std::vector<float>> grads;
  std::vector<uint8_t> decay;
  std::vector<double> lr;
};

Problem MakeProblem() {
  Problem p;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < p.n; ++i) {
    p.params.push_back(0.02f * normal(rng));
    p.decay.push_back(i % 3 != 0);
  }
  for (int t = 0; t < p.steps; ++t) {
    std::vector<float> g(p.n);
    // Mix of scales, a few exact zeros (ε matters there) and a drifting mean.
    for (int i = 0; i < p.n; ++i) g[i] = (i % 17 == 0) ? 0.0f : (0.1f * t / p.steps + normal(rng)) * std::pow(10.0f, (i % 5) - 3);
    p.grads.push_back(g);
    p.lr.push_back(1e-3 * (t + 1) / p.steps + 1e-4);
  }
  return p;
}

AdamSConfig Config() { return AdamSConfig{0.9, 0.95, 1e-8, 0.1}; }

TEST(AdamSTest, MatchesNaiveDoublePrecision) {
  Problem p = MakeProblem();
  AdamS adams(Config(), p.decay);
  std::vector<float> params = p.params;
  std::vector<double> theta(p.params.begin(), p.params.end()), m(p.n, 0.0);
  const AdamSConfig c = Config();
  for (int t = 0; t < p.steps; ++t) {
    ASSERT_TRUE(adams.Step(params.data(), p.grads[t].data(), p.n, p.lr[t]).ok());
    for (int i = 0; i < p.n; ++i) {
      const double g = p.grads[t][i];
      const double v = c.beta2 * m[i] * m[i] + (1 - c.beta2) * g * g;
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
      theta[i] -= p.lr[t] * (m[i] / (std::sqrt(v) + c.epsilon) + (p.decay[i] ? c.weight_decay * theta[i] : 0.0));
    }
    for (int i = 0; i < p.n; ++i) {
      ASSERT_NEAR(params[i], theta[i], 1e-6 * (1 + std::fabs(theta[i]))) << "step " << t << " i " << i;
      // m cancels terms of the coordinate's gradient scale: compare at that scale.
      const double scale = std::pow(10.0, (i % 5) - 3);
      ASSERT_NEAR(adams.first_moment()[i], m[i], 1e-6 * scale);
    }
  }
  EXPECT_EQ(adams.step_count(), p.steps);
}

TEST(AdamSTest, NoBiasCorrectionFirstStepIsBounded) {
  // m1 = (1−β1)g, v1 = (1−β2)g²: the first step is (1−β1)/√(1−β2) ≈ 0.447 lr,
  // not Adam's ±lr.
  AdamS adams({0.9, 0.95, 1e-12, 0.0}, {0});
  float theta = 1.0f, g = 3.0f;
  ASSERT_TRUE(adams.Step(&theta, &g, 1, 0.1).ok());
  EXPECT_NEAR(1.0f - theta, 0.1 * 0.1 / std::sqrt(0.05), 1e-6);
}

TEST(AdamSTest, RefusesWrongSize) {
  AdamS adams(Config(), std::vector<uint8_t>(4, 1));
  std::vector<float> x(5), g(5);
  EXPECT_FALSE(adams.Step(x.data(), g.data(), 5, 1e-3).ok());
}

TEST(AdamSTest, MatchesPyTorchReference) {
  Problem p = MakeProblem();
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/adams_reference";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  {
    std::ofstream cfg(dir + "/config.json");
    cfg << "{\"n\": " << p.n << ", \"steps\": " << p.steps << ", \"beta1\": 0.9, \"beta2\": 0.95, "
        << "\"eps\": 1e-8, \"weight_decay\": 0.1, \"lr\": [";
    for (int t = 0; t < p.steps; ++t) cfg << (t ? ", " : "") << std::to_string(p.lr[t]);
    cfg << "]}";
    std::ofstream(dir + "/params.f32", std::ios::binary)
        .write(reinterpret_cast<const char*>(p.params.data()), p.n * 4);
    std::ofstream grads(dir + "/grads.f32", std::ios::binary);
    for (const auto& g : p.grads) grads.write(reinterpret_cast<const char*>(g.data()), p.n * 4);
    std::ofstream(dir + "/decay.u8", std::ios::binary)
        .write(reinterpret_cast<const char*>(p.decay.data()), p.n);
  }
  // The lr the reference sees is the one written (6 significant digits).
  for (int t = 0; t < p.steps; ++t) p.lr[t] = std::stod(std::to_string(p.lr[t]));
  const std::string command =
      "/usr/bin/python3 -B runtime/optim/adams_reference.py '" + dir + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::vector<double> expected(static_cast<size_t>(p.steps) * p.n);
  std::ifstream in(dir + "/expected.f64", std::ios::binary);
  in.read(reinterpret_cast<char*>(expected.data()), expected.size() * sizeof(double));
  ASSERT_TRUE(in.good());

  AdamS adams(Config(), p.decay);
  std::vector<float> params = p.params;
  for (int t = 0; t < p.steps; ++t) {
    ASSERT_TRUE(adams.Step(params.data(), p.grads[t].data(), p.n, p.lr[t]).ok());
    double diff = 0, moved = 0;
    for (int i = 0; i < p.n; ++i) {
      const double want = expected[static_cast<size_t>(t) * p.n + i];
      diff = std::max(diff, std::fabs(params[i] - want));
      moved = std::max(moved, std::fabs(want - p.params[i]));
    }
    // fp32 vs fp64: errors far below one step's movement.
    EXPECT_LT(diff, 1e-4 * moved + 1e-9) << "step " << t;
  }
}

}  // namespace
}  // namespace corescape::optim
