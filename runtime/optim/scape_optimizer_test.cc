// SCAPE and the baselines over P in-process ranks on a synthetic noisy
// quadratic: every rank's gradient is a deterministic function of (θ, rank,
// step), so runs can be repeated and compared bitwise.
#include "runtime/optim/scape_optimizer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/optim/adams.h"
#include "runtime/optim/in_process_rank_group.h"

namespace corescape::optim {
namespace {

constexpr int kRanks = 4;
constexpr int64_t kSize = 1003;  // not a multiple of P: unequal ranges

float Hash01(uint64_t x) {  // SplitMix64 finalizer → [−1, 1)
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>((x >> 40) * (1.0 / (1ull << 24))) * 2.0f - 1.0f;
}

std::vector<float> InitialParams() {
  std::vector<float> p(kSize);
  for (int64_t j = 0; j < kSize; ++j) p[j] = 0.5f * Hash01(j * 7 + 1);
  return p;
}

DecayMask Decay() {
  DecayMask d(kSize);
  for (int64_t j = 0; j < kSize; ++j) d[j] = j % 5 != 0;
  return d;
}

// Rank r's share of the gradient of Σ_j c_j(θ_j − 0.3)²/2 plus noise; the
// shares sum to the global gradient. `salt` changes the noise.
void Gradient(const std::vector<float>& params, int rank, int64_t step, uint64_t salt,
              std::vector<float>& grads) {
  grads.resize(kSize);
  for (int64_t j = 0; j < kSize; ++j) {
    const float curvature = 0.1f + (j % 13) * 0.2f;
    const float noise = Hash01((salt * 1000003 + step) * 1000003 * 8 + j * 8 + rank);
    grads[j] = (curvature * (params[j] - 0.3f) + 0.5f * noise) / kRanks;
  }
}

struct RankTrace {
  std::vector<std::vector<float>> params;  // after every step
  std::vector<std::vector<float>> m;
  std::vector<GlobalMask> masks;           // applied at every step
  std::vector<OptimizerStepStats> stats;
  std::vector<std::vector<float>> statistic;  // after every step
  std::string saved;                        // SaveState() after `save_at` steps
};

struct RunOptions {
  int64_t steps = 12;
  int64_t save_at = -1;
  // Before step `s` (0-based) on every rank: replace the optimizer state.
  std::function<absl::Status(int rank, int64_t step, DataParallelOptimizer&)> before_step;
  uint64_t salt_from = 1u << 30;  // steps ≥ this use salt 1 (different noise)
  std::vector<float> start_params = InitialParams();
  std::vector<std::string> restore;  // per-rank state to start from
  int64_t first_step = 0;
};

using Factory = std::function<std::unique_ptr<DataParallelOptimizer>(RankGroup*)>;

absl::Status RunRanks(const Factory& make, const RunOptions& options, std::vector<RankTrace>& traces) {
  traces.assign(kRanks, {});
  return RunInProcessRanks(kRanks, [&](int rank, RankGroup& group) -> absl::Status {
    std::unique_ptr<DataParallelOptimizer> opt = make(&group);
    if (!options.restore.empty()) {
      if (auto s = opt->RestoreState(options.restore[rank]); !s.ok()) return s;
    }
    std::vector<float> params = options.start_params, grads;
    RankTrace& trace = traces[rank];
    for (int64_t step = options.first_step; step < options.steps; ++step) {
      if (options.before_step) {
        if (auto s = options.before_step(rank, step, *opt); !s.ok()) return s;
      }
      Gradient(params, rank, step, step >= static_cast<int64_t>(options.salt_from) ? 1 : 0, grads);
      const double lr = 0.01 * std::min<double>(1.0, (step + 1) / 4.0);
      if (auto s = opt->Step(params.data(), grads.data(), kSize, lr); !s.ok()) return s;
      trace.params.push_back(params);
      trace.m.push_back(opt->first_moment());
      trace.stats.push_back(opt->last_step());
      if (auto* scape = dynamic_cast<ScapeOptimizer*>(opt.get())) {
        trace.masks.push_back(scape->current_mask());
        trace.statistic.push_back(scape->MaskStatisticValues());
      }
      if (step + 1 == options.save_at) {
        auto saved = opt->SaveState();
        if (!saved.ok()) return saved.status();
        trace.saved = *saved;
      }
    }
    return absl::OkStatus();
  });
}

Factory Scape(ScapeConfig config) {
  return [config](RankGroup* group) -> std::unique_ptr<DataParallelOptimizer> {
    auto opt = ScapeOptimizer::Create(group, config, Decay());
    EXPECT_TRUE(opt.ok()) << opt.status();
    return std::move(*opt);
  };
}

ScapeConfig Sparse(double density, ScapeRule rule = ScapeConfig{}.rule) {
  ScapeConfig c;
  c.density = density;
  c.dense_warmup_steps = 2;
  c.rule = rule;
  return c;
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ScapeOptimizerTest, DensityOneIsDenseAdamS) {
  std::vector<RankTrace> dense;
  ASSERT_TRUE(RunRanks([](RankGroup* g) -> std::unique_ptr<DataParallelOptimizer> {
                return std::make_unique<DenseAdamSDataParallel>(g, AdamSConfig{}, Decay());
              }, {}, dense).ok());
  {
    // The catch-up rule at K = 1 is AdamS (the reference rule adds bias
    // correction and clipping).
    ScapeConfig c;
    c.density = 1.0;
    c.rule = ScapeRule::kCatchUp;
    std::vector<RankTrace> scape;
    ASSERT_TRUE(RunRanks(Scape(c), {}, scape).ok());
    double worst = 0.0, moved = 0.0;
    const std::vector<float> start = InitialParams();
    for (size_t s = 0; s < dense[0].params.size(); ++s) {
      for (int64_t j = 0; j < kSize; ++j) {
        worst = std::max(worst, double{std::fabs(scape[0].params[s][j] - dense[0].params[s][j])});
        moved = std::max(moved, double{std::fabs(dense[0].params[s][j] - start[j])});
      }
    }
    // fp32 rounding only ((1−β1)·Σg / (1−β1) vs Σg): far below one step (lr ≤ 0.01).
    EXPECT_LT(worst, 1e-6);
    EXPECT_GT(moved, 0.05);
    EXPECT_TRUE(scape[0].stats.back().dense);
  }
}

TEST(ScapeOptimizerTest, MasksArePartitionedExactAndIdenticalEverywhere) {
  for (double density : {0.01, 0.1, 0.37}) {
    std::vector<RankTrace> t;
    ASSERT_TRUE(RunRanks(Scape(Sparse(density)), {}, t).ok());
    auto partition = ParameterPartition::Balanced(kSize, kRanks);
    for (size_t s = 2; s < t[0].masks.size(); ++s) {
      const GlobalMask& mask = t[0].masks[s];
      EXPECT_EQ(mask.step, static_cast<int64_t>(s));
      ASSERT_EQ(mask.parts.size(), static_cast<size_t>(kRanks));
      int64_t total = 0;
      for (int r = 0; r < kRanks; ++r) {
        EXPECT_EQ(static_cast<int64_t>(mask.parts[r].size()),
                  MaskCountForRange(partition->size(r), density));
        for (int64_t j : mask.parts[r]) {
          EXPECT_GE(j, partition->begin(r));
          EXPECT_LT(j, partition->end(r));
        }
        total += mask.parts[r].size();
        EXPECT_EQ(t[r].masks[s], mask) << "rank " << r << " step " << s;
      }
      EXPECT_EQ(static_cast<int64_t>(mask.indices.size()), total);  // no fill-in
      EXPECT_FALSE(t[0].stats[s].dense);
      EXPECT_EQ(t[0].stats[s].synced_values, total);
    }
    for (size_t s = 0; s < 2; ++s) EXPECT_TRUE(t[0].stats[s].dense);
  }
}

TEST(ScapeOptimizerTest, FirstMomentAndParametersBitwiseIdenticalOnAllRanks) {
  {
    ScapeConfig c = Sparse(0.05, ScapeRule::kCatchUp);
    std::vector<RankTrace> t;
    ASSERT_TRUE(RunRanks(Scape(c), {}, t).ok());
    for (size_t s = 0; s < t[0].params.size(); ++s) {
      for (int r = 1; r < kRanks; ++r) {
        ASSERT_TRUE(BitwiseEqual(t[r].params[s], t[0].params[s])) << "rank " << r << " step " << s;
        ASSERT_TRUE(BitwiseEqual(t[r].m[s], t[0].m[s])) << "rank " << r << " step " << s;
      }
    }
  }
}

TEST(ScapeOptimizerTest, MaskIsSelectedOneStepEarlyFromTheStateThen) {
  // Same run twice, except the gradients from step 6 on. The mask applied at
  // step 6 cannot see step 6's gradient: identical in both runs, and equal to
  // each rank's top-k of its statistic after step 5.
  std::vector<RankTrace> a, b;
  ASSERT_TRUE(RunRanks(Scape(Sparse(0.05)), {}, a).ok());
  RunOptions other;
  other.salt_from = 6;
  ASSERT_TRUE(RunRanks(Scape(Sparse(0.05)), other, b).ok());
  EXPECT_EQ(a[0].masks[6], b[0].masks[6]);
  EXPECT_FALSE(BitwiseEqual(a[0].params[6], b[0].params[6]));
  EXPECT_NE(a[0].masks[7], b[0].masks[7]);  // step 6's gradient shapes step 7's mask
  auto partition = ParameterPartition::Balanced(kSize, kRanks);
  for (int r = 0; r < kRanks; ++r) {
    const auto expected = SelectTopK(a[r].statistic[5], partition->begin(r),
                                     MaskCountForRange(partition->size(r), 0.05));
    EXPECT_EQ(a[0].masks[6].parts[r], expected) << "rank " << r;
  }
}

// The next mask is selected beside the values all-reduce and the update
// (from candidates off the current mask, completed with the mask's entries
// afterwards, or for the reference rule from c^r whole). On ranges large
// enough for the threshold selection and statistics full of ties, every
// part must still be exactly the top k of the statistic after the step.
TEST(ScapeOptimizerTest, MaskSelectedDuringTheUpdateIsTheTopKOfTheStateAfterIt) {
  constexpr int kTieRanks = 2;
  constexpr int64_t kTieSize = 50000;
  const std::vector<int64_t> tensors = {0, 20000, kTieSize};
  for (ScapeRule rule : {ScapeRule::kCatchUp, ScapeRule::kReference}) {
    ScapeConfig c = Sparse(0.02, rule);
    auto partition = ScapePartition(c, tensors, kTieRanks);
    ASSERT_TRUE(partition.ok());
    std::vector<std::vector<GlobalMask>> masks(kTieRanks);
    std::vector<std::vector<std::vector<float>>> statistics(kTieRanks);
    absl::Status status = RunInProcessRanks(kTieRanks, [&](int rank, RankGroup& group) -> absl::Status {
      auto opt = ScapeOptimizer::Create(&group, c, DecayMask(kTieSize, 1), tensors);
      if (!opt.ok()) return opt.status();
      std::vector<float> params(kTieSize, 0.0f), grads(kTieSize);
      for (int64_t step = 0; step < 8; ++step) {
        // Gradients on a coarse grid, zero for most coordinates: ties everywhere.
        for (int64_t j = 0; j < kTieSize; ++j) {
          const float h = Hash01(step * 1000003 + j * 2 + rank);
          grads[j] = std::fabs(h) < 0.6f ? 0.0f : std::round(h * 4) / 4;
        }
        if (absl::Status s = (*opt)->Step(params.data(), grads.data(), kTieSize, 0.01); !s.ok()) {
          return s;
        }
        masks[rank].push_back((*opt)->current_mask());
        statistics[rank].push_back((*opt)->MaskStatisticValues());
      }
      return (*opt)->SaveState().status();
    });
    ASSERT_TRUE(status.ok()) << status;
    int64_t compared = 0;
    for (int64_t step = c.dense_warmup_steps; step + 1 < 8; ++step) {
      for (int r = 0; r < kTieRanks; ++r) {
        const std::vector<float>& stat = statistics[r][step];
        const int64_t begin = partition->begin(r);
        std::vector<int64_t> expected;
        if (rule == ScapeRule::kReference) {  // per tensor
          for (size_t t = 0; t + 1 < tensors.size(); ++t) {
            if (tensors[t] < begin || tensors[t] >= partition->end(r)) continue;
            const int64_t numel = tensors[t + 1] - tensors[t];
            auto top = SelectTopK(absl::MakeConstSpan(stat).subspan(tensors[t] - begin, numel),
                                  tensors[t], MaskCountForTensor(numel, c.density));
            expected.insert(expected.end(), top.begin(), top.end());
          }
        } else {
          expected = SelectTopK(stat, begin, MaskCountForRange(partition->size(r), c.density));
        }
        EXPECT_EQ(masks[0][step + 1].parts[r], expected)
            << ScapeRuleName(rule) << " rank " << r << " step " << step + 1;
        ++compared;
      }
    }
    EXPECT_GT(compared, 0);
  }
}

TEST(ScapeOptimizerTest, ResumeFromSavedStateContinuesBitwise) {
  for (MaskScope scope : {MaskScope::kPartitioned, MaskScope::kWholeBuffer}) {
    ScapeConfig c = Sparse(0.05);
    c.scope = scope;
    RunOptions full;
    full.steps = 14;
    full.save_at = 7;  // a mask exchange for step 7 is in flight here
    std::vector<RankTrace> whole;
    ASSERT_TRUE(RunRanks(Scape(c), full, whole).ok());

    RunOptions resumed;
    resumed.steps = 14;
    resumed.first_step = 7;
    resumed.start_params = whole[0].params[6];
    for (int r = 0; r < kRanks; ++r) resumed.restore.push_back(whole[r].saved);
    std::vector<RankTrace> tail;
    ASSERT_TRUE(RunRanks(Scape(c), resumed, tail).ok());
    for (int r = 0; r < kRanks; ++r) {
      for (size_t s = 0; s < tail[r].params.size(); ++s) {
        ASSERT_TRUE(BitwiseEqual(tail[r].params[s], whole[r].params[7 + s]))
            << "rank " << r << " step " << 7 + s;
        ASSERT_TRUE(BitwiseEqual(tail[r].m[s], whole[r].m[7 + s]));
        ASSERT_EQ(tail[r].masks[s], whole[r].masks[7 + s]);
      }
    }
  }
}

TEST(ScapeOptimizerTest, StateRoundTripsAndIsRefusedElsewhere) {
  RunOptions options;
  options.steps = 6;
  options.save_at = 6;
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks(Scape(Sparse(0.1)), options, t).ok());
  ASSERT_TRUE(RunInProcessRanks(kRanks, [&](int rank, RankGroup& group) -> absl::Status {
                auto same = ScapeOptimizer::Create(&group, Sparse(0.1), Decay());
                EXPECT_TRUE((*same)->RestoreState(t[rank].saved).ok());
                EXPECT_EQ((*same)->step_count(), 6);
                EXPECT_TRUE(BitwiseEqual((*same)->first_moment(), t[rank].m.back()));
                EXPECT_TRUE((*same)->pending_mask().has_value());
                EXPECT_EQ((*same)->pending_mask()->step, 6);
                auto again = (*same)->SaveState();
                EXPECT_EQ(*again, t[rank].saved);  // round trip is exact
                // Another density, another rank's state, a corrupted blob.
                auto other = ScapeOptimizer::Create(&group, Sparse(0.2), Decay());
                EXPECT_FALSE((*other)->RestoreState(t[rank].saved).ok());
                auto fresh = ScapeOptimizer::Create(&group, Sparse(0.1), Decay());
                EXPECT_FALSE((*fresh)->RestoreState(t[(rank + 1) % kRanks].saved).ok());
                std::string corrupt = t[rank].saved;
                corrupt[corrupt.size() / 2] ^= 1;
                EXPECT_FALSE((*fresh)->RestoreState(corrupt).ok());
                DenseAdamSDataParallel adams(&group, AdamSConfig{}, Decay());
                EXPECT_FALSE(adams.RestoreState(t[rank].saved).ok());
                return absl::OkStatus();
              }).ok());
}

// Checkpoints are written after the residual sync steps, after which every
// rank holds the ranks' mean residual: rank 0's state then resumes every
// rank, in a later mask epoch, exactly as if the run had not stopped.
TEST(ScapeOptimizerTest, StateAfterAResidualSyncResumesEveryRankInALaterEpochBitwise) {
  ScapeConfig c = Sparse(0.1);
  c.residual_sync_period = 4;  // after steps 3, 7, 11
  RunOptions full;
  full.steps = 14;
  full.save_at = 8;
  std::vector<RankTrace> whole;
  ASSERT_TRUE(RunRanks(Scape(c), full, whole).ok());
  ASSERT_FALSE(whole[0].stats[7].dense);  // a sparse step, then the sync

  ScapeConfig next_epoch = c;
  next_epoch.mask_epoch = 5;
  RunOptions resumed;
  resumed.steps = 14;
  resumed.first_step = 8;
  resumed.start_params = whole[0].params[7];
  resumed.restore.assign(kRanks, whole[0].saved);  // rank 0's state for everyone
  std::vector<RankTrace> tail;
  ASSERT_TRUE(RunRanks(Scape(next_epoch), resumed, tail).ok());
  for (int r = 0; r < kRanks; ++r) {
    for (size_t s = 0; s < tail[r].params.size(); ++s) {
      ASSERT_TRUE(BitwiseEqual(tail[r].params[s], whole[r].params[8 + s]))
          << "rank " << r << " step " << 8 + s;
      ASSERT_TRUE(BitwiseEqual(tail[r].m[s], whole[r].m[8 + s]));
      EXPECT_EQ(tail[r].masks[s].indices, whole[r].masks[8 + s].indices);
      EXPECT_EQ(tail[r].masks[s].mask_epoch, 5u);
    }
  }
}

// After a residual sync every rank holds the ranks' mean residual (so the
// updates, which depend on that mean only, are unchanged), at the price of
// one all-reduce of every residual.
TEST(ScapeOptimizerTest, ResidualSyncSharesTheRanksMeanResidual) {
  ScapeConfig synced = Sparse(0.1);
  synced.residual_sync_period = 4;  // after step 3
  std::vector<std::vector<float>> residual_with(kRanks), residual_without(kRanks);
  auto capture = [](std::vector<std::vector<float>>& into) {
    return [&into](int rank, int64_t step, DataParallelOptimizer& opt) -> absl::Status {
      if (step == 4) into[rank] = dynamic_cast<ScapeOptimizer&>(opt).residual();
      return absl::OkStatus();
    };
  };
  RunOptions options;
  options.steps = 5;
  std::vector<RankTrace> with_sync, without;
  options.before_step = capture(residual_with);
  ASSERT_TRUE(RunRanks(Scape(synced), options, with_sync).ok());
  options.before_step = capture(residual_without);
  ASSERT_TRUE(RunRanks(Scape(Sparse(0.1)), options, without).ok());
  // Nothing differs up to and including step 3; the sync comes after it.
  EXPECT_TRUE(BitwiseEqual(with_sync[0].params[3], without[0].params[3]));
  EXPECT_GE(with_sync[0].stats[3].bytes_sent,
            without[0].stats[3].bytes_sent + int64_t{4} * kSize * (kRanks - 1) / kRanks);
  for (int r = 1; r < kRanks; ++r) EXPECT_TRUE(BitwiseEqual(residual_with[r], residual_with[0]));
  int differing = 0;
  for (int64_t j = 0; j < kSize; ++j) {
    float mean = 0.0f;
    for (int r = 0; r < kRanks; ++r) mean += residual_without[r][j];
    mean /= kRanks;
    ASSERT_NEAR(residual_with[0][j], mean, 1e-6f) << j;
    differing += residual_without[0][j] != residual_without[1][j];
  }
  EXPECT_GT(differing, kSize / 2);  // without the sync the ranks' residuals differ
}

TEST(ScapeOptimizerTest, AnotherRanksStateWithResidualsIsRefused) {
  RunOptions options;
  options.steps = 6;
  options.save_at = 6;  // step 5 was sparse: residuals are held
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks(Scape(Sparse(0.1)), options, t).ok());
  ASSERT_TRUE(RunInProcessRanks(kRanks, [&](int rank, RankGroup& group) -> absl::Status {
                auto opt = ScapeOptimizer::Create(&group, Sparse(0.1), Decay());
                absl::Status s = (*opt)->RestoreState(t[0].saved);
                if (rank == 0) {
                  EXPECT_TRUE(s.ok()) << s;
                } else {
                  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
                  EXPECT_NE(s.message().find("own residuals"), absl::string_view::npos) << s;
                }
                return absl::OkStatus();
              }).ok());
}

// After a membership change the scheduler hands out a new partition map; a
// pending mask cut for the old one is dropped and the first step is dense.
TEST(ScapeOptimizerTest, RestoreUnderAnotherPartitionMapStartsWithADenseStep) {
  ScapeConfig c = Sparse(0.1);
  c.residual_sync_period = 4;
  RunOptions full;
  full.steps = 8;
  full.save_at = 8;
  std::vector<RankTrace> whole;
  ASSERT_TRUE(RunRanks(Scape(c), full, whole).ok());
  constexpr int kShrunk = 3;
  std::vector<std::vector<float>> m_after(kShrunk), params_after(kShrunk);
  ASSERT_TRUE(RunInProcessRanks(kShrunk, [&](int rank, RankGroup& group) -> absl::Status {
                ScapeConfig shrunk = c;
                shrunk.mask_epoch = 2;
                shrunk.partition_bounds = {0, 300, 700, kSize};  // not the balanced cut
                auto opt = ScapeOptimizer::Create(&group, shrunk, Decay());
                if (!opt.ok()) return opt.status();
                EXPECT_EQ((*opt)->partition().bounds(), shrunk.partition_bounds);
                if (auto s = (*opt)->RestoreState(whole[0].saved); !s.ok()) return s;
                EXPECT_FALSE((*opt)->pending_mask().has_value());
                std::vector<float> params = whole[0].params[7], grads;
                for (int64_t step = 8; step < 11; ++step) {
                  Gradient(params, rank, step, 0, grads);
                  if (auto s = (*opt)->Step(params.data(), grads.data(), kSize, 0.01); !s.ok()) {
                    return s;
                  }
                  EXPECT_EQ((*opt)->last_step().dense, step == 8) << "step " << step;
                  if (step > 8) {
                    for (int64_t j : (*opt)->current_mask().indices) {
                      EXPECT_TRUE(j >= 0 && j < kSize);
                    }
                    EXPECT_EQ((*opt)->current_mask().parts[rank].size(),
                              static_cast<size_t>(MaskCountForRange(
                                  shrunk.partition_bounds[rank + 1] - shrunk.partition_bounds[rank],
                                  0.1)));
                  }
                }
                m_after[rank] = (*opt)->first_moment();
                params_after[rank] = params;
                return absl::OkStatus();
              }).ok());
  for (int r = 1; r < kShrunk; ++r) {
    EXPECT_TRUE(BitwiseEqual(m_after[r], m_after[0]));
    EXPECT_TRUE(BitwiseEqual(params_after[r], params_after[0]));
  }
}

TEST(ScapeOptimizerTest, RefusesABadPartitionMap) {
  ASSERT_TRUE(RunInProcessRanks(2, [&](int, RankGroup& group) -> absl::Status {
                for (std::vector<int64_t> bounds : std::vector<std::vector<int64_t>>{
                         {0, kSize}, {0, 500, kSize - 1}, {0, 0, kSize}, {1, 500, kSize}}) {
                  ScapeConfig c = Sparse(0.1);
                  c.partition_bounds = bounds;
                  auto opt = ScapeOptimizer::Create(&group, c, Decay());
                  EXPECT_EQ(opt.status().code(), absl::StatusCode::kInvalidArgument);
                  EXPECT_NE(opt.status().message().find("partition map"), absl::string_view::npos);
                }
                return absl::OkStatus();
              }).ok());
}

TEST(ScapeOptimizerTest, RefusesAMaskOfAnotherStepOrMaskEpoch) {
  for (int variant = 0; variant < 3; ++variant) {
    RunOptions options;
    options.steps = 6;
    options.before_step = [variant](int, int64_t step, DataParallelOptimizer& opt) -> absl::Status {
      if (step != 4) return absl::OkStatus();
      auto& scape = dynamic_cast<ScapeOptimizer&>(opt);
      if (auto saved = scape.SaveState(); !saved.ok()) return saved.status();  // finish the exchange
      GlobalMask mask = *scape.pending_mask();
      if (variant == 0) mask.step = 3;       // last step's mask again
      if (variant == 1) mask.step = 5;       // one from the future
      if (variant == 2) mask.mask_epoch = 7;  // another membership
      scape.SetPendingMask(mask);
      return absl::OkStatus();
    };
    std::vector<RankTrace> t;
    absl::Status s = RunRanks(Scape(Sparse(0.1)), options, t);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("refusing"), absl::string_view::npos) << s;
    EXPECT_EQ(t[0].params.size(), 4u);  // nothing applied at step 4
  }
}

// Whichever thread sends the mask, a step counts its values and one mask
// exchange: the one it started on the caller's thread, or the one its
// mask came by when the exchange's thread sends between steps.
TEST(ScapeOptimizerTest, CountsValueAndMaskBytesExactly) {
  for (MaskSending sending : {MaskSending::kOnCaller, MaskSending::kOnThread}) {
  SCOPED_TRACE(sending == MaskSending::kOnCaller ? "on the caller" : "on the exchange's thread");
  ScapeConfig c = Sparse(0.05);
  c.mask_sending = sending;
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks(Scape(c), {}, t).ok());
  for (int r = 0; r < kRanks; ++r) {
    // Dense step 0: N floats all-reduced; the mask for step 1 is not yet built.
    EXPECT_EQ(t[r].stats[0].bytes_sent, InProcessRankGroup::RingAllReduceBytesSent(kSize, kRanks, r));
    for (size_t s = 2; s < t[r].stats.size(); ++s) {
      const int64_t values = t[r].stats[s].synced_values;
      // Values + this step's mask exchange (sizes, then the parts).
      std::vector<int64_t> part_bytes(kRanks);
      for (int q = 0; q < kRanks; ++q) part_bytes[q] = t[q].stats[s].mask_part_bytes;
      const int64_t expected = InProcessRankGroup::RingAllReduceBytesSent(values, kRanks, r) +
                               InProcessRankGroup::RingAllGatherBytesSent({8, 8, 8, 8}, r) +
                               InProcessRankGroup::RingAllGatherBytesSent(part_bytes, r);
      EXPECT_EQ(t[r].stats[s].bytes_sent, expected) << "rank " << r << " step " << s;
      EXPECT_GT(t[r].stats[s].mask_part_bytes, kMaskHeaderBytes);
    }
  }
  }
}

// The exchange's thread encoding this rank's part and issuing the
// collectives changes no bit of any rank's run, for both the catch-up and
// the reference rule; its coding leaves the step's path.
TEST(ScapeOptimizerTest, SendingTheMaskOnTheExchangesThreadChangesNoBit) {
  // Two tensors per rank: the reference rule's masks are per tensor.
  const std::vector<int64_t> tensors = {0,         kSize / 8,     kSize / 4,     3 * kSize / 8,
                                        kSize / 2, 5 * kSize / 8, 3 * kSize / 4, 7 * kSize / 8,
                                        kSize};
  for (ScapeRule rule : {ScapeRule::kCatchUp, ScapeRule::kReference}) {
    SCOPED_TRACE(ScapeRuleName(rule));
    auto make = [&](MaskSending sending) -> Factory {
      ScapeConfig c = Sparse(0.05, rule);
      c.mask_sending = sending;
      return [c, &tensors](RankGroup* group) -> std::unique_ptr<DataParallelOptimizer> {
        auto opt = ScapeOptimizer::Create(group, c, Decay(), tensors);
        EXPECT_TRUE(opt.ok()) << opt.status();
        return std::move(*opt);
      };
    };
    std::vector<RankTrace> on_caller, on_thread;
    ASSERT_TRUE(RunRanks(make(MaskSending::kOnCaller), {}, on_caller).ok());
    ASSERT_TRUE(RunRanks(make(MaskSending::kOnThread), {}, on_thread).ok());
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(on_thread[r].params.size(), on_caller[r].params.size());
      for (size_t s = 0; s < on_caller[r].params.size(); ++s) {
        EXPECT_TRUE(BitwiseEqual(on_thread[r].params[s], on_caller[r].params[s]))
            << "rank " << r << " step " << s;
        EXPECT_TRUE(BitwiseEqual(on_thread[r].m[s], on_caller[r].m[s]));
        EXPECT_EQ(on_thread[r].masks[s], on_caller[r].masks[s]);
        const OptimizerStepStats& stats = on_thread[r].stats[s];
        // Steps 3 on apply a mask the thread encoded (step 2's came from a
        // Start at the dense step 1's end, and the reference rule's first
        // mask is exchanged at once).
        if (s >= 3) {
          EXPECT_EQ(stats.phases.encode, 0.0) << "rank " << r << " step " << s;
          EXPECT_GT(stats.phases.coding_overlapped, 0.0) << "rank " << r << " step " << s;
          EXPECT_GT(on_caller[r].stats[s].phases.encode, 0.0);
        }
      }
    }
  }
}

// The host selection on a thread pool (statistic in chunks, the top-k's
// passes per chunk) picks the same masks and the host update (in chunks,
// each finding its first mask entry) gives the same bits: runs with and
// without one agree bit for bit, for a range large enough to be cut, with
// the selection beside the update (catch-up) and after it (per-tensor
// masks), for every host rule (the reference rule's in its host store).
TEST(ScapeOptimizerTest, AThreadPoolChangesNoBit) {
  constexpr int64_t kLarge = 3 * (int64_t{1} << 19) + 11;
  constexpr int kPoolRanks = 2;
  const std::vector<int64_t> tensors = {0, kLarge / 3, kLarge};
  // Every host rule's update runs in chunks on the pool too.
  struct Variant {
    const char* name;
    ScapeRule rule;
    bool per_tensor;
  };
  for (const Variant& variant :
       {Variant{"catch-up", ScapeRule::kCatchUp, false},
        Variant{"catch-up per tensor", ScapeRule::kCatchUp, true},
        Variant{"reference", ScapeRule::kReference, true}}) {
    std::vector<float> finals[2];
    std::vector<GlobalMask> masks[2];
    for (int pooled = 0; pooled < 2; ++pooled) {
      ThreadPool pool(4);
      std::vector<std::vector<float>> params(kPoolRanks);
      std::vector<std::vector<GlobalMask>> rank_masks(kPoolRanks);
      absl::Status status =
          RunInProcessRanks(kPoolRanks, [&](int rank, RankGroup& group) -> absl::Status {
            ScapeConfig c = Sparse(0.05, variant.rule);
            c.per_tensor_masks = variant.per_tensor;
            c.dense_warmup_steps = 1;
            auto opt = ScapeOptimizer::Create(&group, c, DecayMask(kLarge, 1), tensors);
            if (!opt.ok()) return opt.status();
            if (pooled) (*opt)->UseThreadPool(&pool);
            std::vector<float>& theta = params[rank];
            theta.assign(kLarge, 0.0f);
            std::vector<float> grads(kLarge);
            for (int64_t step = 0; step < 4; ++step) {
              for (int64_t j = 0; j < kLarge; ++j) {
                grads[j] = Hash01(step * 7919 + j * 2 + rank) * (1.0f + (j % 7)) - 0.1f * theta[j];
              }
              if (absl::Status s = (*opt)->Step(theta.data(), grads.data(), kLarge, 0.01); !s.ok()) {
                return s;
              }
              rank_masks[rank].push_back((*opt)->current_mask());
            }
            return (*opt)->SaveState().status();
          });
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_TRUE(BitwiseEqual(params[0], params[1]));
      finals[pooled] = params[0];
      masks[pooled] = rank_masks[0];
    }
    EXPECT_TRUE(BitwiseEqual(finals[1], finals[0])) << variant.name;
    EXPECT_EQ(masks[1], masks[0]) << variant.name;
    EXPECT_GT(masks[0].back().indices.size(), 0u);
  }
}

TEST(ScapeOptimizerTest, PeriodicDenseRefreshFlushesEveryResidual) {
  ScapeConfig c = Sparse(0.05);
  c.dense_refresh_interval = 4;  // warm-up steps 0, 1; then dense at 5, 9
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks(Scape(c), {}, t).ok());
  for (size_t s = 0; s < t[0].stats.size(); ++s) {
    const bool dense = s < 2 || s == 5 || s == 9;
    EXPECT_EQ(t[0].stats[s].dense, dense) << s;
    EXPECT_EQ(t[0].stats[s].synced_values, dense ? kSize : static_cast<int64_t>(t[0].masks[s].indices.size()));
    for (int r = 1; r < kRanks; ++r) ASSERT_TRUE(BitwiseEqual(t[r].params[s], t[0].params[s]));
  }
}

TEST(ScapeOptimizerTest, DensityScheduleFallsGeometricallyToTheTarget) {
  ScapeConfig c = Sparse(0.01);
  // Warm-up 0, 1; then d^(1/4), d^(2/4), d^(3/4), d, d, ...
  c.density_schedule = {1.0, 4, 1, DensityShape::kGeometric};
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks(Scape(c), {}, t).ok());
  auto partition = ParameterPartition::Balanced(kSize, kRanks);
  for (size_t s = 2; s < t[0].masks.size(); ++s) {
    const double density = std::pow(0.01, std::min(1.0, (s - 1) / 4.0));
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(static_cast<int64_t>(t[0].masks[s].parts[r].size()),
                MaskCountForRange(partition->size(r), density)) << "step " << s;
    }
  }
}

TEST(ScapeOptimizerTest, LinearDensityScheduleFromOneMakesItsFirstStepsDense) {
  ScapeConfig c = Sparse(0.1);
  c.dense_warmup_steps = 1;
  // From step 2: 0.5 (held before), then 0.5 − 0.4·p over 5 steps, then 0.1.
  c.density_schedule = {0.5, 5, 2, DensityShape::kLinear};
  EXPECT_DOUBLE_EQ(c.density_schedule.At(0, 0.1), 0.5);
  EXPECT_DOUBLE_EQ(c.density_schedule.At(4, 0.1), 0.5 - 0.4 * 2 / 5);
  EXPECT_DOUBLE_EQ(c.density_schedule.At(7, 0.1), 0.1);
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks(Scape(c), {}, t).ok());
  auto partition = ParameterPartition::Balanced(kSize, kRanks);
  for (size_t s = 1; s < t[0].masks.size(); ++s) {
    const double density = c.density_schedule.At(s, 0.1);
    EXPECT_EQ(static_cast<int64_t>(t[0].masks[s].parts[0].size()),
              MaskCountForRange(partition->size(0), density)) << "step " << s;
  }
  // A schedule starting at 1 synchronizes everything while the density is 1.
  ScapeConfig from_one = Sparse(0.1);
  from_one.dense_warmup_steps = 0;
  from_one.density_schedule = {1.0, 4, 3, DensityShape::kLinear};
  ASSERT_TRUE(RunRanks(Scape(from_one), {}, t).ok());
  for (size_t s = 0; s < t[0].stats.size(); ++s) EXPECT_EQ(t[0].stats[s].dense, s <= 3) << s;
  ScapeConfig bad = Sparse(0.1);
  bad.density_schedule.start = 0;
  EXPECT_FALSE(bad.Validate().ok());
}

TEST(ScapeOptimizerTest, PerTensorMasksAndDenseSmallTensorsForOurRules) {
  // Five tensors, two of them 3-entry "norm gains" without weight decay.
  const std::vector<int64_t> bounds = {0, 200, 203, 600, 603, kSize};
  DecayMask decay(kSize, 1);
  for (int64_t j : {200, 600}) std::fill(decay.begin() + j, decay.begin() + j + 3, 0);
  auto partition = ParameterPartition::TensorAligned(bounds, kRanks);
  ASSERT_TRUE(partition.ok());
  {
    const ScapeRule rule = ScapeRule::kCatchUp;
    ScapeConfig c = Sparse(0.05, rule);
    c.per_tensor_masks = true;
    c.dense_small_tensors = true;
    std::vector<RankTrace> t;
    ASSERT_TRUE(RunRanks([&](RankGroup* g) -> std::unique_ptr<DataParallelOptimizer> {
                  auto opt = ScapeOptimizer::Create(g, c, decay, bounds);
                  EXPECT_TRUE(opt.ok()) << opt.status();
                  return std::move(*opt);
                }, {}, t).ok());
    for (size_t s = 2; s < t[0].masks.size(); ++s) {
      const GlobalMask& mask = t[0].masks[s];
      for (size_t i = 0; i + 1 < bounds.size(); ++i) {
        const int64_t lo = bounds[i], hi = bounds[i + 1];
        const int64_t taken = std::count_if(mask.indices.begin(), mask.indices.end(),
                                            [&](int64_t j) { return j >= lo && j < hi; });
        EXPECT_EQ(taken, decay[lo] ? MaskCountForTensor(hi - lo, 0.05) : hi - lo)
            << ScapeRuleName(rule) << " step " << s << " tensor " << i;
      }
      for (int r = 0; r < kRanks; ++r) {
        for (int64_t j : mask.parts[r]) {
          EXPECT_GE(j, partition->begin(r));
          EXPECT_LT(j, partition->end(r));
        }
        ASSERT_TRUE(BitwiseEqual(t[r].params[s], t[0].params[s])) << "rank " << r;
        ASSERT_TRUE(BitwiseEqual(t[r].m[s], t[0].m[s])) << "rank " << r;
      }
    }
  }
  // Per-tensor masks are partitioned masks.
  ScapeConfig global = Sparse(0.05);
  global.per_tensor_masks = true;
  global.scope = MaskScope::kWholeBuffer;
  EXPECT_FALSE(global.Validate().ok());
}

TEST(ScapeConfigTest, RemovedResearchRulesAreRefusedWithWhereTheyWent) {
  for (const char* removed : {"reconstructed", "linearized"}) {
    auto rule = ParseScapeRule(removed);
    ASSERT_FALSE(rule.ok());
    EXPECT_EQ(rule.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(rule.status().message().find("docs/scape_search.md"), std::string::npos)
        << rule.status();
  }
  EXPECT_EQ(*ParseScapeRule("catch-up"), ScapeRule::kCatchUp);
  EXPECT_EQ(*ParseScapeRule("reference"), ScapeRule::kReference);
  EXPECT_FALSE(ParseScapeRule("adam").ok());
}

// The checkpoint holds ToString(): its text must not move, or no checkpoint
// written before would restore.
TEST(ScapeConfigTest, ToStringIsTheCheckpointsText) {
  ScapeConfig c = Sparse(0.1);
  EXPECT_EQ(c.ToString(),
            "b1=0.90000000000000002 b2=0.94999999999999996 eps=1e-08 wd=0.10000000000000001 "
            "d=0.10000000000000001 warmup=2 refresh_every=0 scope=0 rule=catch-up off=0 stat=4 "
            "schedule={start=1 warmup=0 from=0 shape=linear} explore=0 forecast=0 "
            "rho=0.94999999999999996 refresh=1 lrw=0 catchup=0.65000000000000002/-1 decayed=0 "
            "residual_sync_period=0 per_tensor=0 dense_small=0 clip=0");
}

TEST(ScapeOptimizerTest, PerRankGlobalTopKFillsIn) {
  ScapeConfig c = Sparse(0.02);
  c.scope = MaskScope::kWholeBuffer;
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks(Scape(c), {}, t).ok());
  const int64_t k = MaskCountForRange(kSize, 0.02);
  for (size_t s = 2; s < t[0].masks.size(); ++s) {
    const int64_t union_size = t[0].masks[s].indices.size();
    EXPECT_GE(union_size, k);
    EXPECT_LE(union_size, kRanks * k);
    for (int r = 1; r < kRanks; ++r) EXPECT_TRUE(BitwiseEqual(t[r].params[s], t[0].params[s]));
  }
  EXPECT_GT(t[0].masks.back().indices.size(), static_cast<size_t>(k));  // fill-in
}

TEST(ScapeOptimizerTest, SparseTrainingStillDescends) {
  // A sanity check on the quadratic, not a quality claim (tools/scape).
  auto loss = [](const std::vector<float>& p) {
    double l = 0;
    for (int64_t j = 0; j < kSize; ++j) l += (0.1 + (j % 13) * 0.2) * (p[j] - 0.3) * (p[j] - 0.3) / 2;
    return l;
  };
  // (The reference rule's descent: scape_reference_test.)
  for (ScapeRule rule : {ScapeRule::kCatchUp}) {
    RunOptions options;
    options.steps = 60;
    std::vector<RankTrace> t;
    ASSERT_TRUE(RunRanks(Scape(Sparse(0.1, rule)), options, t).ok());
    EXPECT_LT(loss(t[0].params.back()), 0.8 * loss(InitialParams())) << ScapeRuleName(rule);
  }
}

// The ranks' gradients at `params`, summed the way the group sums them
// (the data plane's order).
void SummedGradient(const std::vector<float>& params, int64_t step, std::vector<float>& sum) {
  std::vector<std::vector<float>> grads(kRanks);
  std::vector<const float*> per_rank;
  for (int r = 0; r < kRanks; ++r) {
    Gradient(params, r, step, 0, grads[r]);
    per_rank.push_back(grads[r].data());
  }
  SumInDataPlaneOrder(per_rank, kSize, sum.data());
}

TEST(DenseDataParallelTest, AdamWOnTheSummedGradientBitwise) {
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks([](RankGroup* g) -> std::unique_ptr<DataParallelOptimizer> {
                return std::make_unique<DenseAdamWDataParallel>(g, AdamWConfig{}, Decay());
              }, {}, t).ok());
  AdamW reference(AdamWConfig{}, Decay());
  std::vector<float> params = InitialParams(), sum(kSize);
  for (int64_t step = 0; step < 12; ++step) {
    SummedGradient(params, step, sum);
    ASSERT_TRUE(reference.Step(params.data(), sum.data(), kSize,
                               0.01 * std::min<double>(1.0, (step + 1) / 4.0)).ok());
    for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(BitwiseEqual(t[r].params[step], params));
  }
}

// Clipping is part of the AdamW path: the summed gradient is clipped to its
// global norm before the step, and the norm before clipping is reported.
TEST(DenseDataParallelTest, AdamWClipsTheSummedGradientBitwise) {
  static constexpr double kClip = 1e-3;
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks([](RankGroup* g) -> std::unique_ptr<DataParallelOptimizer> {
                return std::make_unique<DenseAdamWDataParallel>(g, AdamWConfig{}, Decay(), kClip);
              }, {}, t).ok());
  AdamW reference(AdamWConfig{}, Decay());
  std::vector<float> params = InitialParams(), sum(kSize);
  int clipped = 0;
  for (int64_t step = 0; step < 12; ++step) {
    SummedGradient(params, step, sum);
    double squares = 0;
    for (float g : sum) squares += double{g} * g;
    const double norm = ClipGradientNorm(sum.data(), kSize, kClip);
    EXPECT_NEAR(norm, std::sqrt(squares), 1e-6 * std::sqrt(squares)) << "step " << step;
    clipped += norm > kClip;
    ASSERT_TRUE(reference.Step(params.data(), sum.data(), kSize,
                               0.01 * std::min<double>(1.0, (step + 1) / 4.0)).ok());
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(BitwiseEqual(t[r].params[step], params)) << "step " << step;
      EXPECT_EQ(t[r].stats[step].grad_norm, norm);
    }
  }
  EXPECT_GT(clipped, 0);  // the clip bound, so the test tells clipped from not
}

TEST(DenseDataParallelTest, TopKGradientAdamWStaysInLockStep) {
  std::vector<RankTrace> t;
  ASSERT_TRUE(RunRanks([](RankGroup* g) -> std::unique_ptr<DataParallelOptimizer> {
                return std::make_unique<TopKGradientAdamW>(g, AdamWConfig{}, Decay(), 0.02);
              }, {}, t).ok());
  const int64_t k = MaskCountForRange(kSize, 0.02);
  for (size_t s = 0; s < t[0].params.size(); ++s) {
    for (int r = 1; r < kRanks; ++r) ASSERT_TRUE(BitwiseEqual(t[r].params[s], t[0].params[s]));
    EXPECT_LE(t[0].stats[s].mask_entries, kRanks * k);
    EXPECT_GE(t[0].stats[s].mask_entries, k);
    // k (index, value) pairs per rank through a ring all-gather.
    EXPECT_EQ(t[0].stats[s].bytes_sent, 8 * k * (kRanks - 1));
  }
}

// topk-adamw's exchange against the host loop it replaced: a dense buffer
// accumulated pair by pair in rank-major order.
TEST(DenseDataParallelTest, AllGatherSparseSumAddsTheUnionInRankOrder) {
  constexpr int kWorld = 3;
  constexpr int64_t kPicks = 40, kBuffer = 100;
  std::vector<std::vector<int64_t>> picks(kWorld);
  std::vector<std::vector<float>> values(kWorld);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int r = 0; r < kWorld; ++r) {
    std::vector<int64_t> all(kBuffer);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    picks[r].assign(all.begin(), all.begin() + kPicks);
    std::sort(picks[r].begin(), picks[r].end());
    for (int64_t p = 0; p < kPicks; ++p) values[r].push_back(value(rng));
  }
  std::vector<float> dense(kBuffer, 0.0f);
  std::vector<bool> touched(kBuffer, false);
  for (int r = 0; r < kWorld; ++r) {
    for (int64_t p = 0; p < kPicks; ++p) {
      dense[picks[r][p]] += values[r][p];
      touched[picks[r][p]] = true;
    }
  }
  InProcessHub hub(kWorld);
  std::vector<absl::StatusOr<SparseSum>> sums(kWorld, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      InProcessRankGroup group(&hub, r);
      sums[r] = AllGatherSparseSum(group, picks[r], values[r], kBuffer, "topk-adamw");
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(sums[r].ok()) << sums[r].status();
    std::vector<int64_t> union_indices;
    for (int64_t j = 0; j < kBuffer; ++j) {
      if (touched[j]) union_indices.push_back(j);
    }
    EXPECT_EQ(sums[r]->indices, union_indices);
    ASSERT_EQ(sums[r]->values.size(), union_indices.size());
    for (size_t p = 0; p < union_indices.size(); ++p) {
      EXPECT_EQ(std::bit_cast<uint32_t>(sums[r]->values[p]),
                std::bit_cast<uint32_t>(dense[union_indices[p]]))
          << "rank " << r << " index " << union_indices[p];
    }
  }
  EXPECT_LT(sums[0]->indices.size(), static_cast<size_t>(kWorld * kPicks)) << "picks overlap";
}

TEST(DenseDataParallelTest, AllGatherSparseSumRefusesUnorderedPicks) {
  InProcessHub lone(1);
  InProcessRankGroup alone(&lone, 0);
  const std::vector<float> two = {1.0f, 2.0f};
  auto unordered = AllGatherSparseSum(alone, std::vector<int64_t>{5, 3}, two, 10, "topk-adamw");
  EXPECT_EQ(unordered.status().code(), absl::StatusCode::kInvalidArgument) << unordered.status();
  auto outside = AllGatherSparseSum(alone, std::vector<int64_t>{3, 10}, two, 10, "topk-adamw");
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument) << outside.status();
  auto huge = AllGatherSparseSum(alone, {}, {}, int64_t{1} << 33, "topk-adamw");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument) << huge.status();

  // A peer's pairs out of order or out of range end the step with DATA_LOSS
  // naming it.
  for (const std::vector<uint32_t>& bad :
       {std::vector<uint32_t>{7, 2}, std::vector<uint32_t>{2, 10}}) {
    InProcessHub hub(2);
    absl::StatusOr<SparseSum> sum = absl::UnknownError("not run");
    std::thread honest([&] {
      InProcessRankGroup group(&hub, 0);
      sum = AllGatherSparseSum(group, std::vector<int64_t>{1, 4}, two, 10, "topk-adamw");
    });
    {
      InProcessRankGroup group(&hub, 1);
      std::vector<char> pairs(16);
      for (int p = 0; p < 2; ++p) {
        std::memcpy(pairs.data() + 8 * p, &bad[p], 4);
        std::memcpy(pairs.data() + 8 * p + 4, &two[p], 4);
      }
      std::vector<char> received(32);
      EXPECT_TRUE(group.AllGatherV(pairs.data(), 16, received.data(), {16, 16}).ok());
    }
    honest.join();
    EXPECT_EQ(sum.status().code(), absl::StatusCode::kDataLoss) << sum.status();
    EXPECT_NE(sum.status().message().find("rank 1"), std::string::npos) << sum.status();
  }
}

}  // namespace
}  // namespace corescape::optim
