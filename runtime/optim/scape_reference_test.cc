// SCAPE's reference rule (the authors' formulation) over P in-process ranks:
// against an independent PyTorch implementation (scape_reference.py), and
// the SCAPE invariants: bitwise-identical m and θ on every rank, one values
// all-reduce per step, masks one step late (the first one synchronous),
// density 1 as bias-corrected clipped AdamS, bitwise resume, masks of
// another epoch refused.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/optim/in_process_rank_group.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::optim {
namespace {

// Seven tensors: matrices and two small non-decaying "norm" vectors.
const std::vector<int64_t> kTensorBounds = {0, 120, 136, 400, 416, 610, 626, 900};
constexpr int64_t kSize = 900;
constexpr int kSteps = 10;

DecayMask Decay() {
  DecayMask d(kSize, 1);
  for (int64_t j : {120, 400, 610}) std::fill(d.begin() + j, d.begin() + j + 16, 0);
  return d;
}

std::vector<float> InitialParams() {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> p(kSize);
  for (float& x : p) x = normal(rng);
  return p;
}

// Open-loop gradients: grads[step][rank][j], rank r's share (the ranks' sum
// is the step's mean gradient), with a per-coordinate drift and noise.
using Gradients = std::vector<std::vector<std::vector<float>>>;
Gradients MakeGradients(int ranks, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Gradients g(steps, std::vector<std::vector<float>>(ranks, std::vector<float>(kSize)));
  for (int s = 0; s < steps; ++s) {
    for (int r = 0; r < ranks; ++r) {
      for (int64_t j = 0; j < kSize; ++j) {
        const float drift = 0.3f * std::sin(0.37f * j);
        g[s][r][j] = (drift + normal(rng)) * (0.05f + 0.01f * (j % 7)) / ranks;
      }
    }
  }
  return g;
}

double Lr(int64_t step) { return 0.02 * std::min(1.0, (step + 1) / 3.0); }

ScapeConfig Reference(double density) {
  ScapeConfig c;
  c.rule = ScapeRule::kReference;
  c.density = density;
  c.dense_warmup_steps = 0;  // the first mask is chosen synchronously at step 0
  c.grad_clip = 0.05;         // binds on some steps
  return c;
}

// Counts the collectives an optimizer issues.
class CountingGroup final : public RankGroup {
 public:
  explicit CountingGroup(RankGroup* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::Status AllReduceSum(float* data, int64_t count) override {
    ++all_reduces;
    return inner_->AllReduceSum(data, count);
  }
  absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                          absl::Span<const int64_t> bytes_per_rank) override {
    return inner_->AllGatherV(send, send_bytes, recv, bytes_per_rank);
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGatherV(
      const void* send, int64_t send_bytes, void* recv,
      absl::Span<const int64_t> bytes_per_rank) override {
    return inner_->StartAllGatherV(send, send_bytes, recv, bytes_per_rank);
  }
  int64_t bytes_sent() const override { return inner_->bytes_sent(); }
  int64_t bytes_received() const override { return inner_->bytes_received(); }
  int all_reduces = 0;

 private:
  RankGroup* inner_;
};

struct Trace {
  std::vector<std::vector<float>> params, m;
  std::vector<GlobalMask> masks;
  std::vector<std::vector<float>> statistic;
  std::vector<int> all_reduces;  // per step
  std::vector<std::vector<int64_t>> ages;  // last_sync() after each step (read_ages)
  std::string saved;
};

struct RunSpec {
  ScapeConfig config;
  int ranks = 4;
  int first_step = 0;
  int steps = kSteps;
  int save_at = -1;
  std::vector<std::string> restore;
  std::vector<float> start = InitialParams();
  Gradients grads;
  std::function<absl::Status(int64_t step, ScapeOptimizer&)> before_step;
  bool read_ages = false;
};

absl::Status RunRanks(const RunSpec& run, std::vector<Trace>& traces) {
  traces.assign(run.ranks, {});
  return RunInProcessRanks(run.ranks, [&](int rank, RankGroup& group) -> absl::Status {
    CountingGroup counting(&group);
    auto opt = ScapeOptimizer::Create(&counting, run.config, Decay(), kTensorBounds);
    if (!opt.ok()) return opt.status();
    if (!run.restore.empty()) {
      if (auto s = (*opt)->RestoreState(run.restore[rank]); !s.ok()) return s;
    }
    std::vector<float> params = run.start;
    Trace& trace = traces[rank];
    for (int step = run.first_step; step < run.steps; ++step) {
      if (run.before_step) {
        if (auto s = run.before_step(step, **opt); !s.ok()) return s;
      }
      std::vector<float> g = run.grads[step][rank];
      const int before = counting.all_reduces;
      if (auto s = (*opt)->Step(params.data(), g.data(), kSize, Lr(step)); !s.ok()) return s;
      trace.all_reduces.push_back(counting.all_reduces - before);
      trace.params.push_back(params);
      trace.m.push_back((*opt)->first_moment());
      trace.masks.push_back((*opt)->current_mask());
      trace.statistic.push_back((*opt)->MaskStatisticValues());
      if (run.read_ages) trace.ages.push_back((*opt)->last_sync());
      if (step + 1 == run.save_at) {
        auto saved = (*opt)->SaveState();
        if (!saved.ok()) return saved.status();
        trace.saved = *saved;
      }
    }
    return absl::OkStatus();
  });
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Writes the problem, runs scape_reference.py, reads θ after every step and
// the masks it applied.
void RunPythonReference(const RunSpec& run, bool dense_small, std::vector<double>& expected,
                        std::vector<std::vector<int64_t>>& masks) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/scape_reference_" +
                          std::to_string(run.ranks) + (dense_small ? "_small" : "");
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  const ScapeConfig& c = run.config;
  {
    std::ofstream cfg(dir + "/config.json");
    cfg.precision(17);
    cfg << "{\"ranks\": " << run.ranks << ", \"n\": " << kSize << ", \"steps\": " << run.steps
        << ", \"beta1\": " << c.adams.beta1 << ", \"beta2\": " << c.adams.beta2
        << ", \"eps\": " << c.adams.epsilon << ", \"weight_decay\": " << c.adams.weight_decay
        << ", \"grad_clip\": " << c.grad_clip
        << ", \"dense_small_tensors\": " << (dense_small ? "true" : "false")
        << ", \"tensor_bounds\": [";
    for (size_t i = 0; i < kTensorBounds.size(); ++i) cfg << (i ? ", " : "") << kTensorBounds[i];
    cfg << "], \"lr\": [";
    for (int t = 0; t < run.steps; ++t) cfg << (t ? ", " : "") << static_cast<float>(Lr(t));
    cfg << "], \"density\": [";
    for (int t = 0; t < run.steps; ++t) cfg << (t ? ", " : "") << c.density;
    cfg << "], \"dense\": [";
    for (int t = 0; t < run.steps; ++t) cfg << (t ? ", " : "") << (t < c.dense_warmup_steps ? "true" : "false");
    cfg << "]}";
    const std::vector<float> start = run.start;
    std::ofstream(dir + "/params.f32", std::ios::binary)
        .write(reinterpret_cast<const char*>(start.data()), kSize * 4);
    std::ofstream grads(dir + "/grads.f32", std::ios::binary);
    for (const auto& step : run.grads) {
      for (const auto& rank : step) grads.write(reinterpret_cast<const char*>(rank.data()), kSize * 4);
    }
    const DecayMask decay = Decay();
    std::ofstream(dir + "/decay.u8", std::ios::binary)
        .write(reinterpret_cast<const char*>(decay.data()), kSize);
  }
  const std::string command = "/usr/bin/python3 -B runtime/optim/scape_reference.py '" + dir + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  expected.assign(static_cast<size_t>(run.steps) * kSize, 0.0);
  std::ifstream in(dir + "/expected.f64", std::ios::binary);
  in.read(reinterpret_cast<char*>(expected.data()), expected.size() * sizeof(double));
  ASSERT_TRUE(in.good());
  std::ifstream mask_file(dir + "/masks.txt");
  std::string line;
  masks.clear();
  while (std::getline(mask_file, line)) {
    std::istringstream fields(line);
    std::vector<int64_t> mask;
    for (int64_t j; fields >> j;) mask.push_back(j);
    masks.push_back(mask);
  }
  ASSERT_EQ(static_cast<int>(masks.size()), run.steps);
}

TEST(ScapeReferenceTest, MatchesThePyTorchReferenceOnTwoToFourRanks) {
  for (int ranks : {2, 3, 4}) {
    for (bool dense_small : {false, true}) {
      RunSpec run;
      run.ranks = ranks;
      run.config = Reference(0.1);
      run.config.dense_warmup_steps = ranks == 3 ? 2 : 0;  // dense steps before the first mask too
      run.config.dense_small_tensors = dense_small;
      run.grads = MakeGradients(ranks, kSteps, 11 + ranks);
      std::vector<Trace> traces;
      ASSERT_TRUE(RunRanks(run, traces).ok());
      std::vector<double> expected;
      std::vector<std::vector<int64_t>> masks;
      RunPythonReference(run, dense_small, expected, masks);
      if (HasFatalFailure()) return;
      const std::vector<float> start = InitialParams();
      for (int t = 0; t < kSteps; ++t) {
        const bool dense = t < run.config.dense_warmup_steps;
        EXPECT_EQ(traces[0].masks[t].indices, dense ? std::vector<int64_t>{} : masks[t])
            << "P " << ranks << " step " << t;
        double diff = 0, moved = 0;
        for (int64_t j = 0; j < kSize; ++j) {
          const double want = expected[static_cast<size_t>(t) * kSize + j];
          diff = std::max(diff, std::fabs(traces[0].params[t][j] - want));
          moved = std::max(moved, std::fabs(want - start[j]));
        }
        // fp32 vs fp64: far below the parameters' movement.
        EXPECT_LT(diff, 1e-4 * moved) << "P " << ranks << " step " << t;
        EXPECT_GT(moved, 0.0);
      }
    }
  }
}

TEST(ScapeReferenceTest, PerTensorOwnerMasksAndBitwiseIdenticalStateOnEveryRank) {
  RunSpec run;
  run.config = Reference(0.05);
  run.config.dense_small_tensors = true;
  run.grads = MakeGradients(run.ranks, kSteps, 5);
  std::vector<Trace> t;
  ASSERT_TRUE(RunRanks(run, t).ok());
  auto partition = ParameterPartition::TensorAligned(kTensorBounds, run.ranks);
  ASSERT_TRUE(partition.ok());
  for (int s = 0; s < kSteps; ++s) {
    // ONE values all-reduce per step (the first step's mask exchange is an
    // all-gather, not a second all-reduce).
    for (int r = 0; r < run.ranks; ++r) EXPECT_EQ(t[r].all_reduces[s], 1) << "rank " << r;
    const GlobalMask& mask = t[0].masks[s];
    ASSERT_EQ(mask.parts.size(), static_cast<size_t>(run.ranks));
    for (int r = 0; r < run.ranks; ++r) {
      for (int64_t j : mask.parts[r]) {
        EXPECT_GE(j, partition->begin(r));
        EXPECT_LT(j, partition->end(r));
      }
      EXPECT_EQ(t[r].masks[s], mask);
      ASSERT_TRUE(BitwiseEqual(t[r].params[s], t[0].params[s])) << "rank " << r << " step " << s;
      ASSERT_TRUE(BitwiseEqual(t[r].m[s], t[0].m[s])) << "rank " << r << " step " << s;
    }
    // Every tensor: the small ones whole, the others max(1, floor(d·numel)).
    for (size_t i = 0; i + 1 < kTensorBounds.size(); ++i) {
      const int64_t lo = kTensorBounds[i], hi = kTensorBounds[i + 1];
      const int64_t in_tensor = std::count_if(mask.indices.begin(), mask.indices.end(),
                                              [&](int64_t j) { return j >= lo && j < hi; });
      EXPECT_EQ(in_tensor, Decay()[lo] ? MaskCountForTensor(hi - lo, 0.05) : hi - lo);
    }
    // m is 0 off the mask.
    std::vector<uint8_t> on(kSize, 0);
    for (int64_t j : mask.indices) on[j] = 1;
    for (int64_t j = 0; j < kSize; ++j) {
      if (!on[j]) {
        ASSERT_EQ(t[0].m[s][j], 0.0f) << j;
      }
    }
  }
}

TEST(ScapeReferenceTest, MasksAreOneStepLateAndTheFirstIsSynchronous) {
  RunSpec run;
  run.config = Reference(0.1);
  run.grads = MakeGradients(run.ranks, kSteps, 7);
  std::vector<Trace> a, b;
  ASSERT_TRUE(RunRanks(run, a).ok());
  RunSpec other = run;
  Gradients changed = MakeGradients(run.ranks, kSteps, 8);
  for (int s = 5; s < kSteps; ++s) other.grads[s] = changed[s];
  ASSERT_TRUE(RunRanks(other, b).ok());
  // The mask applied at step 5 cannot see step 5's gradient; step 6's does.
  EXPECT_EQ(a[0].masks[5], b[0].masks[5]);
  EXPECT_FALSE(BitwiseEqual(a[0].params[5], b[0].params[5]));
  EXPECT_NE(a[0].masks[6], b[0].masks[6]);
  auto partition = ParameterPartition::TensorAligned(kTensorBounds, run.ranks);
  ASSERT_TRUE(partition.ok());
  auto per_tensor_top = [&](const std::vector<float>& statistic, int r) {
    std::vector<int64_t> chosen;
    for (size_t i = 0; i + 1 < kTensorBounds.size(); ++i) {
      const int64_t lo = kTensorBounds[i], hi = kTensorBounds[i + 1];
      if (lo < partition->begin(r) || lo >= partition->end(r)) continue;
      auto top = SelectTopK(absl::MakeConstSpan(statistic).subspan(lo - partition->begin(r), hi - lo),
                            lo, MaskCountForTensor(hi - lo, 0.1));
      chosen.insert(chosen.end(), top.begin(), top.end());
    }
    return chosen;
  };
  for (int r = 0; r < run.ranks; ++r) {
    // Step 6's mask: top-k of |c^r| of step 5; step 0's: of step 0's own.
    EXPECT_EQ(a[0].masks[6].parts[r], per_tensor_top(a[r].statistic[5], r)) << "rank " << r;
    EXPECT_EQ(a[0].masks[0].parts[r], per_tensor_top(a[r].statistic[0], r)) << "rank " << r;
  }
  EXPECT_EQ(a[0].masks[0].step, 0);
}

// The ages are set a step late, beside the next forward/backward; read
// after a step they are that step's all the same: the step of each
// coordinate's last synchronization (every coordinate at a dense step).
TEST(ScapeReferenceTest, AgesAreEachCoordinatesLastSynchronizedStep) {
  RunSpec run;
  run.config = Reference(0.1);
  run.config.dense_warmup_steps = 2;
  run.grads = MakeGradients(run.ranks, kSteps, 11);
  run.read_ages = true;
  std::vector<Trace> t;
  ASSERT_TRUE(RunRanks(run, t).ok());
  std::vector<int64_t> expected(kSize, -1);
  for (int s = 0; s < kSteps; ++s) {
    if (s < 2) {
      std::fill(expected.begin(), expected.end(), s);
    } else {
      ASSERT_FALSE(t[0].masks[s].indices.empty());
      for (int64_t j : t[0].masks[s].indices) expected[j] = s;
    }
    for (int r = 0; r < run.ranks; ++r) ASSERT_EQ(t[r].ages[s], expected) << "rank " << r << " step " << s;
  }
  // Read or not, the run is the same.
  RunSpec unread = run;
  unread.read_ages = false;
  std::vector<Trace> u;
  ASSERT_TRUE(RunRanks(unread, u).ok());
  for (int s = 0; s < kSteps; ++s) ASSERT_TRUE(BitwiseEqual(u[0].params[s], t[0].params[s])) << s;
}

TEST(ScapeReferenceTest, DensityOneIsBiasCorrectedClippedAdamS) {
  // At d = 1 every residual is 0 and b = β1·m + (1−β1)·Σ_r g^r, so the
  // reference rule is AdamS WITH bias correction and ĝ clipped to its global
  // norm, not our dense AdamS (which has neither); checked against a naive
  // double-precision loop.
  RunSpec run;
  run.config = Reference(1.0);
  run.grads = MakeGradients(run.ranks, kSteps, 9);
  std::vector<Trace> t;
  ASSERT_TRUE(RunRanks(run, t).ok());
  const ScapeConfig& c = run.config;
  const std::vector<float> start = InitialParams();
  std::vector<double> theta(start.begin(), start.end()), m(kSize, 0.0);
  const DecayMask decay = Decay();
  bool clipped = false;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<double> g(kSize, 0.0);
    double norm = 0;
    for (int64_t j = 0; j < kSize; ++j) {
      for (int r = 0; r < run.ranks; ++r) g[j] += run.grads[s][r][j];
      norm += g[j] * g[j];
    }
    norm = std::sqrt(norm);
    const double scale = norm > c.grad_clip ? c.grad_clip / (norm + 1e-6) : 1.0;
    clipped |= scale < 1.0;
    const double lr = static_cast<float>(Lr(s));
    for (int64_t j = 0; j < kSize; ++j) {
      const double gj = g[j] * scale;
      const double v = c.adams.beta2 * m[j] * m[j] + (1 - c.adams.beta2) * gj * gj;
      m[j] = c.adams.beta1 * m[j] + (1 - c.adams.beta1) * gj;
      const double mh = m[j] / (1 - std::pow(c.adams.beta1, s + 1));
      const double vh = std::sqrt(v) / std::sqrt(1 - std::pow(c.adams.beta2, s + 1));
      theta[j] -= lr * (mh / (vh + c.adams.epsilon) + (decay[j] ? c.adams.weight_decay * theta[j] : 0.0));
    }
    for (int64_t j = 0; j < kSize; ++j) {
      ASSERT_NEAR(t[0].params[s][j], theta[j], 2e-5) << "step " << s << " j " << j;
    }
    EXPECT_EQ(t[0].masks[s].indices.size(), 0u);  // dense: no mask
  }
  EXPECT_TRUE(clipped);
}

TEST(ScapeReferenceTest, ResumesBitwiseFromSavedState) {
  RunSpec full;
  full.config = Reference(0.05);
  full.config.dense_small_tensors = true;
  full.grads = MakeGradients(full.ranks, 14, 4);
  full.steps = 14;
  full.save_at = 6;  // the mask exchange for step 6 is in flight here
  std::vector<Trace> whole;
  ASSERT_TRUE(RunRanks(full, whole).ok());
  RunSpec resumed = full;
  resumed.save_at = -1;
  resumed.first_step = 6;
  resumed.start = whole[0].params[5];
  for (int r = 0; r < full.ranks; ++r) resumed.restore.push_back(whole[r].saved);
  std::vector<Trace> tail;
  ASSERT_TRUE(RunRanks(resumed, tail).ok());
  for (int r = 0; r < full.ranks; ++r) {
    for (int s = 0; s < 8; ++s) {
      ASSERT_TRUE(BitwiseEqual(tail[r].params[s], whole[r].params[6 + s])) << "rank " << r << " step " << 6 + s;
      ASSERT_TRUE(BitwiseEqual(tail[r].m[s], whole[r].m[6 + s]));
    }
  }
  // Another rule's state is refused.
  ScapeConfig ours = full.config;
  ours.rule = ScapeRule::kCatchUp;
  ours.per_tensor_masks = true;
  RunSpec wrong = resumed;
  wrong.config = ours;
  std::vector<Trace> refused;
  EXPECT_EQ(RunRanks(wrong, refused).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ScapeReferenceTest, RefusesAMaskOfAnotherMaskEpoch) {
  RunSpec run;
  run.config = Reference(0.1);
  run.config.mask_epoch = 3;
  run.grads = MakeGradients(run.ranks, kSteps, 2);
  run.before_step = [](int64_t step, ScapeOptimizer& opt) -> absl::Status {
    if (step != 4) return absl::OkStatus();
    // Wait for the step-4 exchange, then restamp its mask with epoch 2.
    if (auto saved = opt.SaveState(); !saved.ok()) return saved.status();
    GlobalMask mask = *opt.pending_mask();
    mask.mask_epoch = 2;
    opt.SetPendingMask(mask);
    return absl::OkStatus();
  };
  std::vector<Trace> t;
  const absl::Status status = RunRanks(run, t);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("mask epoch 2"), std::string::npos) << status;
}

TEST(ScapeReferenceTest, RefusesAPartitionMapThatCutsATensor) {
  ScapeConfig c = Reference(0.1);
  c.partition_bounds = {0, 450, kSize};
  absl::Status status;
  ASSERT_TRUE(RunInProcessRanks(2, [&](int rank, RankGroup& group) -> absl::Status {
                auto opt = ScapeOptimizer::Create(&group, c, Decay(), kTensorBounds);
                if (rank == 0) status = opt.status();
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("bound 450 cuts a tensor"), std::string::npos) << status;
}

}  // namespace
}  // namespace corescape::optim
