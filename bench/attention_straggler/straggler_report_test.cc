// The benchmark's arithmetic: batches, result files, spreads and step time.
#include "bench/attention_straggler/straggler_report.h"

#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "bench/attention_straggler/bench_config.h"
#include "bench/attention_straggler/rank_results.h"

namespace corescape::bench {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;

TEST(StragglerConfigTest, EveryWorkerHoldsTheSameTokens) {
  StragglerConfig config;
  config.workers = 3;
  config.tokens_per_worker = 1000;
  config.short_document = 128;
  EXPECT_EQ(config.DocumentLengths(0), std::vector<int64_t>{1000});
  for (int w = 1; w < 3; ++w) {
    const std::vector<int64_t> lengths = config.DocumentLengths(w);
    EXPECT_EQ(lengths.size(), 8u);
    EXPECT_EQ(lengths.back(), 1000 - 7 * 128);
    EXPECT_EQ(std::accumulate(lengths.begin(), lengths.end(), int64_t{0}), 1000);
  }
  EXPECT_EQ(CausalPairsOf({4, 2}), 10 + 3);
  EXPECT_TRUE(config.Validate().ok());
  config.n_kv_heads = 3;
  EXPECT_FALSE(config.Validate().ok());
}

TEST(RankResultsTest, RoundTrip) {
  WorkerResult w;
  w.worker = 1;
  w.forward_seconds = {0.25, 0.125};
  w.backward_seconds = {0.5, 1.0 / 3};
  w.cpu_seconds = {0.7, 0.4};
  w.bytes_moved = {1e6, 2e6};
  w.plan_imbalance = 1.02;
  w.plan_server_pairs = {100, 98};
  w.plan_tasks = 5;
  w.plan_split_documents = 1;
  auto decoded = DecodeWorkerResult(EncodeWorkerResult(w));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->worker, 1);
  EXPECT_EQ(decoded->backward_seconds, w.backward_seconds);
  EXPECT_EQ(decoded->cpu_seconds, w.cpu_seconds);
  EXPECT_EQ(decoded->plan_server_pairs, w.plan_server_pairs);
  EXPECT_EQ(decoded->plan_imbalance, 1.02);

  ServerResult s;
  s.server = 2;
  s.compute_seconds = {0.1, 0.2};
  s.cpu_seconds = {0.15, 0.25};
  s.tasks = 7;
  auto server = DecodeServerResult(EncodeServerResult(s));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(server->compute_seconds, s.compute_seconds);
  EXPECT_EQ(server->cpu_seconds, s.cpu_seconds);
  EXPECT_EQ(server->tasks, 7);

  EXPECT_FALSE(DecodeWorkerResult("worker 0\nforward_seconds x\n").ok());
  EXPECT_FALSE(DecodeServerResult("tasks 1\n").ok());
}

TEST(SummarizeTest, StepIsTheSlowestWorkerOfEachRepeat) {
  StragglerConfig config;
  config.workers = 2;
  std::vector<WorkerResult> workers(2);
  workers[0].worker = 0;
  workers[0].forward_seconds = {0.3, 0.1, 0.3};
  workers[0].backward_seconds = {0.7, 0.1, 0.7};  // totals 1.0, 0.2, 1.0
  workers[0].cpu_seconds = {0.9, 0.2, 1.0};
  workers[1].worker = 1;
  workers[1].forward_seconds = {0.1, 0.2, 0.1};
  workers[1].backward_seconds = {0.1, 0.4, 0.1};  // totals 0.2, 0.6, 0.2
  workers[1].cpu_seconds = {0.2, 0.5, 0.2};
  auto m = Summarize(config, AttentionMode::kColocated, workers, {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->step_per_repeat, ElementsAre(DoubleEq(1.0), DoubleEq(0.6), DoubleEq(1.0)));
  EXPECT_DOUBLE_EQ(m->step, 1.0);
  EXPECT_DOUBLE_EQ(m->step_best, 0.6);
  EXPECT_DOUBLE_EQ(m->worker_total[0], 1.0);
  EXPECT_DOUBLE_EQ(m->worker_total[1], 0.2);
  EXPECT_DOUBLE_EQ(m->spread_max_min, 5.0);
  EXPECT_DOUBLE_EQ(m->spread_max_mean, 1.0 / 0.6);
  EXPECT_GT(m->plan_imbalance, 1.5);  // worker 0's one long document
  EXPECT_DOUBLE_EQ(m->cpu_per_step, 1.1);  // repeats: 1.1, 0.7, 1.2
  EXPECT_DOUBLE_EQ(m->cpu_step_estimate, 0.9);
  EXPECT_EQ(m->worker_cpu, (std::vector<double>{0.9, 0.2}));

  workers[1].forward_seconds.pop_back();
  EXPECT_FALSE(Summarize(config, AttentionMode::kColocated, workers, {}).ok());
}

TEST(SummarizeTest, DisaggregatedTakesPlanAndServers) {
  StragglerConfig config;
  config.workers = 1;
  WorkerResult w;
  w.forward_seconds = {0.2};
  w.backward_seconds = {0.4};
  w.cpu_seconds = {0.1};
  w.bytes_moved = {3e6};
  w.plan_imbalance = 1.01;
  w.plan_server_pairs = {10, 11};
  ServerResult a, b;
  a.compute_seconds = {0.2};
  a.cpu_seconds = {0.25};
  b.compute_seconds = {0.4};
  b.cpu_seconds = {0.5};
  auto m = Summarize(config, AttentionMode::kDisaggregated, {w}, {a, b});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->server_compute, (std::vector<double>{0.2, 0.4}));
  EXPECT_EQ(m->server_cpu, (std::vector<double>{0.25, 0.5}));
  EXPECT_DOUBLE_EQ(m->cpu_per_step, 0.85);
  EXPECT_DOUBLE_EQ(m->cpu_step_estimate, 0.6);  // server 1 + the worker
  EXPECT_DOUBLE_EQ(m->server_spread_max_min, 2.0);
  EXPECT_DOUBLE_EQ(m->plan_imbalance, 1.01);
  EXPECT_DOUBLE_EQ(m->bytes_per_worker_step, 3e6);
  EXPECT_DOUBLE_EQ(Median({}), 0);
  b.cpu_seconds.push_back(1);  // a repeat more than the workers
  EXPECT_FALSE(Summarize(config, AttentionMode::kDisaggregated, {w}, {a, b}).ok());
}

}  // namespace
}  // namespace corescape::bench
