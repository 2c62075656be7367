// In-place core attention with 2 and 3 workers in one process, each with
// its own UCX transport on loopback and its own thread: what the workers
// compute for each other equals the local kernel, for raw tensors on skewed
// batches (a long document split across workers) and for a whole
// transformer's loss and gradients; the plan really moves work; calls out of
// step fail with a clear error on every worker.
#include "runtime/attention/in_place_core_attention.h"

#include <cmath>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/attention/executor_test_calls.h"
#include "runtime/base/clock.h"
#include "runtime/comm/loopback_ranks.h"
#include "runtime/model/transformer.h"

namespace corescape::attention {
namespace {

// Runs body(rank, executor) on one thread per worker.
void RunWorkers(int workers, const InPlaceOptions& options,
                const std::function<void(int, InPlaceCoreAttention&)>& body) {
  absl::Status ranks = comm::RunLoopbackRanks(
      workers, "unit/attn-inplace",
      [&](int r, std::unique_ptr<comm::Communicator> communicator) {
        auto executor = InPlaceCoreAttention::Create(std::move(communicator), options);
        ASSERT_TRUE(executor.ok()) << executor.status();
        body(r, **executor);
      });
  ASSERT_TRUE(ranks.ok()) << ranks;
}

// Documents of the given lengths back to back, then 8 padding rows no task
// touches.
RandomBatch MakeBatch(std::mt19937& rng, const kernels::AttentionShape& shape,
                      const std::vector<int64_t>& lengths) {
  RandomBatch b;
  int64_t row = 0;
  for (int64_t length : lengths) {
    b.tasks.push_back({0, length, row, row});
    row += length;
  }
  b.rows = row + 8;
  FillRandomTensors(rng, shape, b);
  return b;
}

// Worker 0 holds one long document, the others many short ones: the
// straggler case the in-place plan fixes.
std::vector<int64_t> SkewedLengths(std::mt19937& rng, int worker) {
  if (worker == 0) return {240 + static_cast<int64_t>(rng() % 40), 7};
  std::vector<int64_t> lengths;
  for (int64_t total = 0; total < 200;) {
    lengths.push_back(1 + rng() % 30);
    total += lengths.back();
  }
  return lengths;
}

struct KernelCase {
  int workers;
  bool keep;
  double tolerance;
};

void PrintTo(const KernelCase& c, std::ostream* os) {
  *os << c.workers << " workers, " << (c.keep ? "keeping" : "resending") << ", tolerance "
      << c.tolerance;
}

class InPlaceKernelTest : public ::testing::TestWithParam<KernelCase> {};

// Micro-batch 0: skewed forward + backward; 1: forward only (validation);
// 2: random lengths forward + backward.
TEST_P(InPlaceKernelTest, WorkersComputeWhatTheLocalKernelComputes) {
  const KernelCase c = GetParam();
  const kernels::AttentionShape shape{4, 2, 8, 1.0f / std::sqrt(8.0f)};
  const int layers = 2, micro_batches = 3;
  std::mt19937 rng(200 + c.workers);
  std::vector<std::vector<RandomBatch>> batches(micro_batches);  // [micro-batch][worker]
  for (int w = 0; w < c.workers; ++w) {
    batches[0].push_back(MakeBatch(rng, shape, SkewedLengths(rng, w)));
    batches[1].push_back(MakeBatch(rng, shape, SkewedLengths(rng, c.workers - 1 - w)));
    std::vector<int64_t> lengths;
    for (int d = 0; d < 6; ++d) lengths.push_back(1 + rng() % 80);
    batches[2].push_back(MakeBatch(rng, shape, lengths));
  }
  InPlaceOptions options;
  options.n_layers = layers;
  options.tolerance = c.tolerance;
  options.keep_qkv_for_backward = c.keep;
  std::vector<InPlaceStats> stats(c.workers);
  std::vector<bool> moved_worker0_to_1(micro_batches, false);
  std::vector<int64_t> split_documents(micro_batches, 0);
  RunWorkers(c.workers, options, [&](int w, InPlaceCoreAttention& executor) {
    model::LocalCoreAttention local(nullptr);
    for (int m = 0; m < micro_batches; ++m) {
      const bool backward = m != 1;
      Outputs in_place, expected;
      ASSERT_TRUE(RunCalls(local, shape, layers, batches[m][w], backward, expected).ok());
      absl::Status s = RunCalls(executor, shape, layers, batches[m][w], backward, in_place);
      ASSERT_TRUE(s.ok()) << s;
      const std::string where = absl::StrCat("worker ", w, " micro-batch ", m);
      EXPECT_LE(RelativeError(in_place.o, expected.o), 1e-6) << "o " << where;
      EXPECT_LE(RelativeError(in_place.lse, expected.lse), 1e-6) << "lse " << where;
      if (backward) {
        EXPECT_LE(RelativeError(in_place.d_q, expected.d_q), 1e-6) << "d_q " << where;
        EXPECT_LE(RelativeError(in_place.d_k, expected.d_k), 1e-6) << "d_k " << where;
        EXPECT_LE(RelativeError(in_place.d_v, expected.d_v), 1e-6) << "d_v " << where;
      }
      if (w == 0) {
        const MicroBatchPlan& plan = *executor.current_plan();
        split_documents[m] = plan.plan.stats.split_documents;
        for (const planner::PlannedTask& task : plan.plan.tasks) {
          if (task.worker == 0 && task.server == 1) moved_worker0_to_1[m] = true;
        }
      }
    }
    stats[w] = executor.stats();
  });
  // Worker 0's long document is too much for it alone: part of it runs on
  // worker 1, so that document is split across workers.
  EXPECT_TRUE(moved_worker0_to_1[0]) << "no task of worker 0 ran on worker 1";
  EXPECT_GT(split_documents[0], 0) << "the long document was not split";
  int64_t shipped = 0, received = 0;
  for (int w = 0; w < c.workers; ++w) {
    EXPECT_EQ(stats[w].micro_batches, micro_batches);
    EXPECT_EQ(stats[w].exchanges, micro_batches * layers + 2 * layers);
    EXPECT_GT(stats[w].tasks_computed, 0) << "worker " << w << " computed nothing";
    shipped += stats[w].tasks_shipped;
    received += stats[w].peer_tasks_computed;
  }
  EXPECT_GT(stats[0].tasks_shipped, 0);
  EXPECT_EQ(shipped, received);
}

INSTANTIATE_TEST_SUITE_P(Cases, InPlaceKernelTest,
                         ::testing::Values(KernelCase{2, true, 0.0}, KernelCase{2, false, 0.05},
                                           KernelCase{3, true, 0.05}, KernelCase{3, false, 0.0}),
                         [](const ::testing::TestParamInfo<KernelCase>& info) {
                           return absl::StrCat(info.param.workers, "Workers",
                                               info.param.keep ? "Keeping" : "Resending",
                                               info.param.tolerance == 0 ? "Exact" : "Tolerant");
                         });

// Balanced batches need no moves: everything stays at home, nothing but
// headers crosses the wire.
TEST(InPlacePlanTest, BalancedBatchesStayAtHome) {
  const kernels::AttentionShape shape{2, 1, 4, 0.5f};
  std::mt19937 rng(9);
  std::vector<RandomBatch> batches;
  for (int w = 0; w < 2; ++w) batches.push_back(MakeBatch(rng, shape, {50, 20, 20}));
  InPlaceOptions options;
  options.n_layers = 1;
  RunWorkers(2, options, [&](int w, InPlaceCoreAttention& executor) {
    Outputs out;
    ASSERT_TRUE(RunCalls(executor, shape, 1, batches[w], true, out).ok());
    EXPECT_EQ(executor.stats().tasks_shipped, 0);
    EXPECT_EQ(executor.stats().peer_tasks_computed, 0);
    EXPECT_EQ(executor.current_plan()->plan.bytes_moved, 0);
  });
}

// The workers plan among themselves: the scheduler's server weights and
// plans do not apply, and are refused rather than dropped silently.
TEST(InPlaceCoreAttentionTest, RefusesTheSchedulersWeightsAndPlans) {
  RunWorkers(2, InPlaceOptions{}, [&](int w, InPlaceCoreAttention& executor) {
    const absl::Status weights = executor.SetSpeedWeights(VersionedSpeedWeights{3, {1.0, 2.0}});
    EXPECT_EQ(weights.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(weights.message().find("no attention servers' speed weights"), std::string::npos)
        << weights;
    ShippedPlan plan;
    plan.step = 5;
    const absl::Status offered = executor.OfferShippedPlan(plan);
    EXPECT_EQ(offered.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(offered.message().find("no scheduler plan (step 5)"), std::string::npos) << offered;
  });
}

// The worker whose thread runs the current RunWorkers body.
thread_local int tls_worker = -1;

// Every read moves the reading worker's own time on by its step, so each
// fused kernel call (timed between two reads on the worker's thread) takes
// exactly that step, whatever the machine is doing.
class SteppingClock final : public Clock {
 public:
  explicit SteppingClock(std::vector<absl::Duration> step_per_worker)
      : steps_(std::move(step_per_worker)) {}
  absl::Time Now() const override {
    thread_local absl::Time now = absl::UnixEpoch();
    now += steps_.at(tls_worker);
    return now;
  }

 private:
  const std::vector<absl::Duration> steps_;
};

// A worker whose attention kernel is slow gets less of the attention: each
// worker times its fused calls and announces its speed with its documents,
// and all plan with the same weights. With learn_speeds off the shares stay
// even. Results equal the local kernel's either way.
TEST(InPlaceSpeedTest, SlowWorkerGetsLessAttention) {
  const kernels::AttentionShape shape{4, 2, 8, 0.35f};
  constexpr int kMicroBatches = 4;
  for (const bool learn : {true, false}) {
    SCOPED_TRACE(learn ? "learning speeds" : "equal speeds");
    std::mt19937 rng(21);
    std::vector<std::vector<RandomBatch>> batches(2);  // [worker][micro-batch]
    for (int w = 0; w < 2; ++w) {
      for (int m = 0; m < kMicroBatches; ++m) {
        batches[w].push_back(MakeBatch(rng, shape, {120, 90, 60, 30}));
      }
    }
    InPlaceOptions options;
    options.n_layers = 1;
    options.tolerance = 0.02;
    options.learn_speeds = learn;
    // Every kernel call of worker 1 takes 10 ms, of worker 0 1 ms: worker
    // 1 is measured about ten times slower per unit of cost.
    const SteppingClock clock({absl::Milliseconds(1), absl::Milliseconds(10)});
    options.clock = &clock;
    absl::Mutex mu;
    std::vector<std::vector<std::vector<planner::PlannedTask>>> plans(2);  // [worker][mb]
    std::vector<double> slow_share(2);  // worker 1's share of the last plan's cost
    std::vector<InPlaceStats> stats(2);
    RunWorkers(2, options, [&](int w, InPlaceCoreAttention& executor) {
      tls_worker = w;
      for (int m = 0; m < kMicroBatches; ++m) {
        Outputs got, expected;
        ASSERT_TRUE(RunCalls(executor, shape, 1, batches[w][m], true, got).ok());
        model::LocalCoreAttention local(nullptr);
        ASSERT_TRUE(RunCalls(local, shape, 1, batches[w][m], true, expected).ok());
        EXPECT_LE(RelativeError(got.o, expected.o), 1e-6) << "worker " << w << " mb " << m;
        EXPECT_LE(RelativeError(got.d_q, expected.d_q), 1e-6) << "worker " << w << " mb " << m;
        EXPECT_LE(RelativeError(got.d_k, expected.d_k), 1e-6) << "worker " << w << " mb " << m;
        const planner::Plan& plan = executor.current_plan()->plan;
        absl::MutexLock lock(&mu);
        plans[w].push_back(plan.tasks);
        slow_share[w] = plan.servers[1].flops / (plan.servers[0].flops + plan.servers[1].flops);
      }
      absl::MutexLock lock(&mu);
      stats[w] = executor.stats();
    });
    for (int m = 0; m < kMicroBatches; ++m) {
      EXPECT_EQ(plans[0][m], plans[1][m]) << "the workers planned micro-batch " << m
                                          << " differently";
    }
    ASSERT_EQ(stats[0].speed_weights.size(), 2u);
    EXPECT_EQ(stats[0].speed_weights, stats[1].speed_weights);
    if (learn) {
      EXPECT_LT(stats[0].speed_weights[1], 0.6) << "worker 1 was not measured as slow";
      // Ten times slower per call on a smaller share: down to the clamp.
      EXPECT_NEAR(stats[0].speed_weights[1], 0.1, 1e-3);
      EXPECT_LT(slow_share[0], 0.4);
      EXPECT_GT(stats[1].tasks_shipped, 0) << "the slow worker kept all its attention";
    } else {
      EXPECT_EQ(stats[0].speed_weights, (std::vector<double>{1.0, 1.0}));
      EXPECT_NEAR(slow_share[0], 0.5, 0.03);
    }
  }
}

// A whole model: micro-batch 0 forward + backward, a forward-only
// (validation) micro-batch, micro-batch 2 forward + backward; loss and
// every gradient tensor as with the local kernel.
model::ModelBatch MakeModelBatch(std::mt19937& rng, const model::ModelConfig& config, int worker,
                                 int seq_len) {
  model::ModelBatch b;
  b.batch_size = 2;
  b.seq_len = seq_len;
  for (int r = 0; r < b.batch_size; ++r) {
    for (int start = 0; start < seq_len;) {
      // Worker 0's sequences are whole long documents: its attention is
      // the straggler.
      const int most = worker == 0 ? seq_len : 20;
      const int length =
          std::min(seq_len - start, worker == 0 ? most : 1 + static_cast<int>(rng() % most));
      AppendDocument(rng, config, r, start, length, b);
      start += length;
    }
  }
  return b;
}

void ExpectModelEquivalent(int workers, bool keep) {
  const model::ModelConfig config = SmallModelConfig(128);
  std::mt19937 rng(31 + workers);
  std::vector<std::vector<model::ModelBatch>> batches(workers);  // [worker][micro-batch]
  for (int w = 0; w < workers; ++w) {
    for (int m = 0; m < 3; ++m) batches[w].push_back(MakeModelBatch(rng, config, w, 128));
  }
  std::vector<ModelRun> expected(workers), in_place(workers);
  for (int w = 0; w < workers; ++w) {
    model::LocalCoreAttention local(nullptr);
    expected[w] = RunModel(config, batches[w], local);
  }
  InPlaceOptions options;
  options.n_layers = config.n_layers;
  options.tolerance = 0.0;
  options.keep_qkv_for_backward = keep;
  int64_t shipped = 0;
  RunWorkers(workers, options, [&](int w, InPlaceCoreAttention& executor) {
    in_place[w] = RunModel(config, batches[w], executor);
    if (w == 0) shipped = executor.stats().tasks_shipped;
  });
  EXPECT_GT(shipped, 0) << "worker 0's long documents stayed at home";
  ExpectSameModelRuns(config, in_place, expected);
}

TEST(InPlaceModelTest, TwoWorkers) { ExpectModelEquivalent(2, true); }
TEST(InPlaceModelTest, ThreeWorkersResending) { ExpectModelEquivalent(3, false); }

// Two workers of a two-layer executor, each with documents {30, 20} of
// random tensors from `seed`: runs the forward of `forward_layers` layers,
// then `call`, and returns each worker's status from `call`.
std::vector<absl::Status> RunThenCall(
    int seed, int forward_layers,
    const std::function<absl::Status(int, InPlaceCoreAttention&, const kernels::AttentionShape&,
                                      const RandomBatch&, Outputs&)>& call) {
  const kernels::AttentionShape shape{4, 2, 8, 0.35f};
  std::mt19937 rng(seed);
  std::vector<RandomBatch> batches;
  for (int w = 0; w < 2; ++w) batches.push_back(MakeBatch(rng, shape, {30, 20}));
  InPlaceOptions options;
  options.n_layers = 2;
  std::vector<absl::Status> results(2);
  RunWorkers(2, options, [&](int w, InPlaceCoreAttention& executor) {
    const RandomBatch& b = batches[w];
    Outputs out;
    ASSERT_TRUE(RunCalls(executor, shape, forward_layers, b, /*backward=*/false, out).ok());
    results[w] = call(w, executor, shape, b, out);
  });
  return results;
}

// A call out of order fails on the caller with the reason, and its peer
// fails too instead of waiting for its timeout.
TEST(InPlaceProtocolTest, OutOfOrderCallFailsEveryWorker) {
  const std::vector<absl::Status> results = RunThenCall(
      3, 2, [](int w, InPlaceCoreAttention& executor, const kernels::AttentionShape& shape,
               const RandomBatch& b, Outputs& out) {
        // Worker 0: backward of layer 0 with layer 1 skipped.
        return executor.Backward(BackwardCall(w == 0 ? 0 : 1, shape, b, out));
      });
  EXPECT_EQ(results[0].code(), absl::StatusCode::kFailedPrecondition) << results[0];
  EXPECT_NE(results[0].message().find("expected backward in reverse layer order"),
            std::string::npos)
      << results[0];
  EXPECT_FALSE(results[1].ok());
  EXPECT_NE(results[1].message().find("reverse layer order"), std::string::npos) << results[1];
}

// Workers whose calls disagree (one starts a new micro-batch while the
// other is at layer 1) see the mismatch in the first header.
TEST(InPlaceProtocolTest, WorkersOutOfStepSeeTheMismatch) {
  const std::vector<absl::Status> results = RunThenCall(
      4, 1, [](int w, InPlaceCoreAttention& executor, const kernels::AttentionShape& shape,
               const RandomBatch& b, Outputs& out) {
        return executor.Forward(ForwardCall(w == 0 ? 1 : 0, shape, b, out));
      });
  for (int w = 0; w < 2; ++w) {
    EXPECT_FALSE(results[w].ok()) << "worker " << w;
  }
  const std::string both = absl::StrCat(results[0].message(), " | ", results[1].message());
  EXPECT_NE(both.find("out of step"), std::string::npos) << both;
}

TEST(InPlaceCreateTest, RejectsBadOptions) {
  InPlaceOptions options;
  options.n_layers = 0;
  EXPECT_EQ(InPlaceCoreAttention::Create(nullptr, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace corescape::attention
