// Workers and attention servers in one process, each rank with its own UCX
// transport on loopback and its own thread: core attention computed on the
// servers equals the colocated kernel, for raw tensors on random batches and
// for a whole transformer's loss and gradients.
#include "runtime/attention/disaggregated_core_attention.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/attention/attention_server_session.h"
#include "runtime/attention/executor_test_calls.h"
#include "runtime/attention/in_process_attention_cluster.h"
#include "runtime/model/transformer.h"

namespace corescape::attention {
namespace {

using ClusterSetup = InProcessAttentionCluster;

// The cluster's server statistics; every server must end cleanly unless
// the test breaks the protocol on purpose.
std::vector<ServerSessionStats> RunCluster(
    const ClusterSetup& setup,
    const std::function<void(int worker, DisaggregatedCoreAttention&)>& worker_body,
    bool expect_servers_ok = true) {
  std::vector<ServerSessionStats> stats;
  auto outcomes = RunInProcessAttentionCluster(setup, worker_body);
  EXPECT_TRUE(outcomes.ok()) << outcomes.status();
  if (!outcomes.ok()) return stats;
  for (const ServerOutcome& outcome : *outcomes) {
    if (expect_servers_ok) {
      EXPECT_TRUE(outcome.served.ok()) << outcome.served;
    }
    stats.push_back(outcome.stats);
  }
  return stats;
}

RandomBatch MakeBatch(std::mt19937& rng, const kernels::AttentionShape& shape, int64_t rows) {
  RandomBatch b;
  b.rows = rows;
  int64_t row = 0;
  // A long document first (it gets split), then short ones; the tail of the
  // buffer is padding no task touches.
  while (row < rows - 8) {
    const int64_t length =
        std::min<int64_t>(rows - 8 - row, b.tasks.empty() ? 150 + rng() % 100 : 1 + rng() % 50);
    b.tasks.push_back({0, length, row, row});
    row += length;
  }
  FillRandomTensors(rng, shape, b);
  return b;
}

struct KernelCase {
  int workers, servers;
  PlannerKind planner;
  bool keep;
};

class KernelEquivalenceTest : public ::testing::TestWithParam<KernelCase> {};

TEST_P(KernelEquivalenceTest, ServersComputeWhatTheLocalKernelComputes) {
  const KernelCase c = GetParam();
  const kernels::AttentionShape shape{4, 2, 8, 1.0f / std::sqrt(8.0f)};
  const int layers = 2, micro_batches = 2;
  std::mt19937 rng(100 + c.workers * 10 + c.servers);
  // [micro-batch][worker]
  std::vector<std::vector<RandomBatch>> batches(micro_batches);
  for (auto& per_worker : batches) {
    for (int w = 0; w < c.workers; ++w) per_worker.push_back(MakeBatch(rng, shape, 320));
  }
  ClusterSetup setup;
  setup.workers = c.workers;
  setup.servers = c.servers;
  setup.options.n_layers = layers;
  setup.options.tolerance = 0.0;  // balance exactly: split documents
  setup.options.planner = c.planner;
  setup.options.keep_qkv_for_backward = c.keep;
  std::vector<int64_t> split_documents(c.workers, 0);
  std::vector<ServerSessionStats> stats =
      RunCluster(setup, [&](int w, DisaggregatedCoreAttention& executor) {
        model::LocalCoreAttention local(nullptr);
        for (int m = 0; m < micro_batches; ++m) {
          Outputs remote, expected;
          ASSERT_TRUE(
              RunCalls(local, shape, layers, batches[m][w], /*backward=*/true, expected).ok());
          absl::Status s =
              RunCalls(executor, shape, layers, batches[m][w], /*backward=*/true, remote);
          ASSERT_TRUE(s.ok()) << s;
          split_documents[w] += executor.current_plan()->plan.stats.split_documents;
          EXPECT_LE(RelativeError(remote.o, expected.o), 1e-6) << "o";
          EXPECT_LE(RelativeError(remote.lse, expected.lse), 1e-6) << "lse";
          EXPECT_LE(RelativeError(remote.d_q, expected.d_q), 1e-6) << "d_q";
          EXPECT_LE(RelativeError(remote.d_k, expected.d_k), 1e-6) << "d_k";
          EXPECT_LE(RelativeError(remote.d_v, expected.d_v), 1e-6) << "d_v";
        }
      });
  if (c.servers > 1) {
    EXPECT_GT(split_documents[0], 0) << "no document was split";
  }
  for (const ServerSessionStats& s : stats) {
    EXPECT_EQ(s.micro_batches, micro_batches);
    EXPECT_EQ(s.exchanges, micro_batches * layers * 2);
    EXPECT_GT(s.tasks, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, KernelEquivalenceTest,
    ::testing::Values(KernelCase{1, 1, PlannerKind::kCorescape, true},
                      KernelCase{2, 2, PlannerKind::kCorescape, true},
                      KernelCase{2, 3, PlannerKind::kCorescape, false},
                      KernelCase{3, 4, PlannerKind::kCorescape, true},
                      // DistCA's greedy moves mirrored head/tail pairs.
                      KernelCase{2, 2, PlannerKind::kDistcaGreedy, true},
                      KernelCase{1, 4, PlannerKind::kDistcaGreedy, false}));

// A whole model: micro-batch 0 forward + backward, a forward-only
// (validation) micro-batch, micro-batch 2 forward + backward; loss and every
// gradient tensor as colocated.
model::ModelBatch MakeModelBatch(std::mt19937& rng, const model::ModelConfig& config,
                                 int batch_size, int seq_len) {
  model::ModelBatch b;
  b.batch_size = batch_size;
  b.seq_len = seq_len;
  for (int r = 0; r < batch_size; ++r) {
    int start = 0;
    while (start < seq_len) {
      const int length = std::min(seq_len - start, 1 + static_cast<int>(rng() % (r == 0 ? 200 : 30)));
      AppendDocument(rng, config, r, start, length, b);
      start += length;
    }
  }
  return b;
}

void ExpectModelEquivalent(int workers, int servers, bool keep) {
  const model::ModelConfig config = SmallModelConfig(256);
  std::mt19937 rng(5 + workers * 7 + servers);
  std::vector<std::vector<model::ModelBatch>> batches(workers);  // [worker][micro-batch]
  for (int w = 0; w < workers; ++w) {
    for (int m = 0; m < 3; ++m) batches[w].push_back(MakeModelBatch(rng, config, 2, 256));
  }
  std::vector<ModelRun> expected(workers), remote(workers);
  for (int w = 0; w < workers; ++w) {
    model::LocalCoreAttention local(nullptr);
    expected[w] = RunModel(config, batches[w], local);
  }
  ClusterSetup setup;
  setup.workers = workers;
  setup.servers = servers;
  setup.options.n_layers = config.n_layers;
  setup.options.tolerance = 0.0;
  setup.options.keep_qkv_for_backward = keep;
  RunCluster(setup, [&](int w, DisaggregatedCoreAttention& executor) {
    remote[w] = RunModel(config, batches[w], executor);
  });
  ExpectSameModelRuns(config, remote, expected);
}

TEST(DisaggregatedModelTest, OneWorkerOneServer) { ExpectModelEquivalent(1, 1, true); }
TEST(DisaggregatedModelTest, TwoWorkersTwoServers) { ExpectModelEquivalent(2, 2, true); }
TEST(DisaggregatedModelTest, TwoWorkersFourServersResending) {
  ExpectModelEquivalent(2, 4, false);
}

// The server's queue depth counts the requests it holds unanswered: worker
// 0's layer-1 request while worker 1 is held back, both once worker 1's
// arrives, none once they are answered.
TEST(DisaggregatedQueueDepthTest, CountsRequestsHeldOnTheServerThenReturnsToZero) {
  const kernels::AttentionShape shape{4, 2, 8, 0.35f};
  std::mt19937 rng(9);
  const std::vector<RandomBatch> batches = {MakeBatch(rng, shape, 96), MakeBatch(rng, shape, 96)};
  absl::Mutex mu;
  int32_t depth = 0;
  std::vector<int32_t> changes;
  ClusterSetup setup;
  setup.workers = 2;
  setup.servers = 1;
  setup.options.n_layers = 2;
  setup.on_queue_depth = [&](int server, int32_t queued) {
    EXPECT_EQ(server, 0);
    absl::MutexLock lock(&mu);
    depth = queued;
    changes.push_back(queued);
  };
  RunCluster(setup, [&](int w, DisaggregatedCoreAttention& executor) {
    Outputs out = ZeroOutputs(shape, batches[w].rows);
    ASSERT_TRUE(executor.Forward(ForwardCall(0, shape, batches[w], out)).ok());
    if (w == 1) {
      // Layer 0 is answered, so the server holds only worker 0's layer 1.
      absl::MutexLock lock(&mu);
      auto one_queued = [&]() { return depth == 1; };
      ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&one_queued), absl::Seconds(60)))
          << "the server never counted worker 0's request alone";
    }
    ASSERT_TRUE(executor.Forward(ForwardCall(1, shape, batches[w], out)).ok());
  });
  absl::MutexLock lock(&mu);
  EXPECT_EQ(depth, 0);
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(*std::max_element(changes.begin(), changes.end()), 2);
  // Layer 1: one request held, then both, then none.
  const std::vector<int32_t> held = {1, 2, 0};
  EXPECT_NE(std::search(changes.begin(), changes.end(), held.begin(), held.end()), changes.end())
      << absl::StrJoin(changes, ",");
}

// A worker whose calls break the order gets a clear error, not garbage.
TEST(DisaggregatedProtocolTest, OutOfOrderCallIsRejected) {
  const kernels::AttentionShape shape{4, 2, 8, 0.35f};
  std::mt19937 rng(3);
  const RandomBatch b = MakeBatch(rng, shape, 64);
  ClusterSetup setup;
  setup.options.n_layers = 2;
  Outputs out = ZeroOutputs(shape, b.rows);
  RunCluster(setup, [&](int, DisaggregatedCoreAttention& executor) {
    // Backward before any forward: the worker has no plan.
    absl::Status s = executor.Backward(BackwardCall(0, shape, b, out));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    ASSERT_TRUE(executor.Forward(ForwardCall(0, shape, b, out)).ok());
    // Backward of layer 0 straight after the forward of layer 0 (layer 1
    // skipped): the server refuses and the exchange fails naming why.
    s = executor.Backward(BackwardCall(0, shape, b, out));
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("expected backward in reverse layer order"), std::string::npos)
        << s;
  }, /*expect_servers_ok=*/false);
}

}  // namespace
}  // namespace corescape::attention
