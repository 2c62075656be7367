// Ping-pong equals the whole micro-batch (colocated, and with core attention
// on 2 in-process attention servers for 2 workers), and really keeps both
// halves' exchanges in flight at once.
#include "runtime/train/ping_pong_schedule.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/attention/executor_test_calls.h"
#include "runtime/attention/in_place_core_attention.h"
#include "runtime/attention/in_process_attention_cluster.h"
#include "runtime/comm/loopback_ranks.h"

namespace corescape::train {
namespace {

using attention::ExchangeEvent;
using attention::ModelRun;
using attention::Pass;

// The executors' tests' small model with three layers.
model::ModelConfig SmallConfig() {
  model::ModelConfig config = attention::SmallModelConfig(/*max_seq_len=*/64);
  config.n_layers = 3;
  return config;
}

// Packed rows of whole documents (one task each), some padding at row ends.
model::ModelBatch MakeBatch(std::mt19937& rng, const model::ModelConfig& config, int batch_size,
                            int seq_len) {
  model::ModelBatch b;
  b.batch_size = batch_size;
  b.seq_len = seq_len;
  for (int r = 0; r < batch_size; ++r) {
    int start = 0;
    while (start < seq_len) {
      const int length = std::min(seq_len - start, 1 + static_cast<int>(rng() % 40));
      const bool padding = start > 0 && rng() % 5 == 0;
      if (!padding) {
        b.attention_tasks.push_back(
            {0, length, int64_t{r} * seq_len + start, int64_t{r} * seq_len + start});
      }
      for (int i = 0; i < length; ++i) {
        b.tokens.push_back(static_cast<int32_t>(rng() % config.vocab_size));
        b.positions.push_back(padding ? 0 : i);
        b.targets.push_back(!padding && i + 1 < length
                                ? static_cast<int32_t>(rng() % config.vocab_size)
                                : -1);
      }
      start += length;
    }
  }
  return b;
}

double RelativeError(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(double{a[i]} - b[i]));
    scale = std::max(scale, std::abs(double{b[i]}));
  }
  return scale > 0 ? diff / scale : diff;
}

// Micro-batch 1 is forward only (validation), the others train (forward +
// backward); all through the ping-pong schedule when `ping_pong` and
// the batch splits, else whole.
ModelRun Train(const model::ModelConfig& config, const std::vector<model::ModelBatch>& batches,
                model::CoreAttentionExecutor& attention, bool ping_pong) {
  ModelRun result;
  auto model = model::Transformer::Create(config);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return result;
  model->InitializeWeights(11);
  EXPECT_TRUE(model->ZeroGradients().ok());
  PingPongSchedule schedule(*model);
  model::Activations whole;
  for (size_t m = 0; m < batches.size(); ++m) {
    const bool split = ping_pong && PingPongSchedule::Splits(batches[m]);
    auto loss = split ? schedule.Forward(batches[m], attention)
                      : model->Forward(batches[m], attention, whole);
    EXPECT_TRUE(loss.ok()) << loss.status();
    if (!loss.ok()) return result;
    result.losses.push_back(loss->loss_sum);
    if (m == 1) continue;
    absl::Status s = split ? schedule.Backward(attention, 1.0f / 1000)
                           : model->Backward(attention, whole, 1.0f / 1000);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return result;
  }
  result.gradients = model->gradients();
  return result;
}

void ExpectEquivalent(const model::ModelConfig& config, const ModelRun& got,
                      const ModelRun& expected, const std::string& what) {
  ASSERT_EQ(got.losses.size(), expected.losses.size()) << what;
  for (size_t m = 0; m < got.losses.size(); ++m) {
    EXPECT_NEAR(got.losses[m], expected.losses[m], 1e-5 * std::abs(expected.losses[m]))
        << what << " micro-batch " << m;
  }
  ASSERT_EQ(got.gradients.size(), expected.gradients.size()) << what;
  auto model = model::Transformer::Create(config);
  ASSERT_TRUE(model.ok());
  for (const model::TensorSlot& slot : model->layout().tensors()) {
    EXPECT_LE(RelativeError(got.gradients.data() + slot.offset,
                            expected.gradients.data() + slot.offset, slot.size),
              1e-5)
        << what << " " << slot.name;
  }
}

// Each worker's micro-batches (4, 3, 1 and 4 rows: the one-row one is not
// split) and what training on them colocated, without ping-pong, gives.
struct ColocatedRuns {
  std::vector<std::vector<model::ModelBatch>> batches;  // [worker][micro-batch]
  std::vector<ModelRun> results;                       // [worker]
};

ColocatedRuns TrainColocated(const model::ModelConfig& config, int workers, uint32_t seed) {
  std::mt19937 rng(seed);
  ColocatedRuns runs;
  runs.batches.resize(workers);
  for (int w = 0; w < workers; ++w) {
    for (int rows : {4, 3, 1, 4}) runs.batches[w].push_back(MakeBatch(rng, config, rows, 64));
  }
  for (int w = 0; w < workers; ++w) {
    model::LocalCoreAttention local(nullptr);
    runs.results.push_back(Train(config, runs.batches[w], local, /*ping_pong=*/false));
  }
  return runs;
}

TEST(SplitIntoHalvesTest, WholeRowsWithTheirTasks) {
  const model::ModelConfig config = SmallConfig();
  std::mt19937 rng(1);
  const model::ModelBatch batch = MakeBatch(rng, config, 3, 16);
  auto halves = SplitIntoHalves(batch, config);
  ASSERT_TRUE(halves.ok()) << halves.status();
  const model::ModelBatch& a = (*halves)[0];
  const model::ModelBatch& b = (*halves)[1];
  ASSERT_GE(a.batch_size, 1);
  ASSERT_GE(b.batch_size, 1);
  EXPECT_EQ(a.batch_size + b.batch_size, 3);
  const int64_t split = int64_t{a.batch_size} * 16;
  EXPECT_EQ(a.tokens, std::vector<int32_t>(batch.tokens.begin(), batch.tokens.begin() + split));
  EXPECT_EQ(b.targets, std::vector<int32_t>(batch.targets.begin() + split, batch.targets.end()));
  EXPECT_EQ(b.positions,
            std::vector<int32_t>(batch.positions.begin() + split, batch.positions.end()));
  ASSERT_EQ(a.attention_tasks.size() + b.attention_tasks.size(), batch.attention_tasks.size());
  for (size_t i = 0; i < batch.attention_tasks.size(); ++i) {
    const kernels::AttentionTask& task = batch.attention_tasks[i];
    const bool in_a = i < a.attention_tasks.size();
    const kernels::AttentionTask& got =
        in_a ? a.attention_tasks[i] : b.attention_tasks[i - a.attention_tasks.size()];
    EXPECT_EQ(got.q_end, task.q_end);
    EXPECT_EQ(got.q_row, task.q_row - (in_a ? 0 : split));
    EXPECT_EQ(got.kv_row, task.kv_row - (in_a ? 0 : split));
    EXPECT_EQ(in_a, task.q_row < split);
  }

  model::ModelBatch crossing = batch;
  crossing.attention_tasks.push_back({0, 40, 4, 4});  // rows 4..44 span every split
  EXPECT_EQ(SplitIntoHalves(crossing, config).status().code(),
            absl::StatusCode::kInvalidArgument);
  model::ModelBatch one_row = MakeBatch(rng, config, 1, 16);
  EXPECT_FALSE(PingPongSchedule::Splits(one_row));
  EXPECT_FALSE(SplitIntoHalves(one_row, config).ok());
}

// Rows of whole documents of the given lengths (the rest of a row padding).
model::ModelBatch RowsOfDocuments(const std::vector<std::vector<int>>& rows, int seq_len) {
  model::ModelBatch b;
  b.batch_size = static_cast<int>(rows.size());
  b.seq_len = seq_len;
  b.tokens.assign(b.rows(), 1);
  b.targets.assign(b.rows(), -1);
  b.positions.assign(b.rows(), 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t at = int64_t{static_cast<int>(r)} * seq_len;
    for (int length : rows[r]) {
      b.attention_tasks.push_back({0, length, at, at});
      for (int i = 0; i < length; ++i) b.positions[at + i] = i;
      at += length;
    }
  }
  return b;
}

// Brute force over every split row k with the cost written out: forward
// FLOPs of the dense part of a layer (2 per weight) for every token of the
// half's rows, plus 4·heads·head_dim per causal pair L(L+1)/2 of its
// documents; the smallest larger half wins, ties to the k nearest ceil(B/2).
int ExpectedSplitRow(const std::vector<std::vector<int>>& rows, int seq_len,
                     const model::ModelConfig& c) {
  const double head_dim = c.d_model / c.n_heads;
  const double dense_per_token =
      2.0 * (static_cast<double>(c.d_model) * (c.n_heads + 2 * c.n_kv_heads) * head_dim +
             c.n_heads * head_dim * c.d_model + 3.0 * c.d_model * c.d_ff);
  const double per_pair = 4.0 * c.n_heads * head_dim;
  auto cost = [&](size_t first, size_t last) {
    double flops = 0;
    for (size_t r = first; r < last; ++r) {
      flops += seq_len * dense_per_token;
      for (int length : rows[r]) flops += per_pair * length * (length + 1.0) / 2;
    }
    return flops;
  };
  const int b = static_cast<int>(rows.size());
  const int middle = (b + 1) / 2;
  int best = -1;
  double best_cost = 0;
  for (int k = 1; k < b; ++k) {
    const double larger = std::max(cost(0, k), cost(k, b));
    if (best < 0 || larger < best_cost ||
        (larger == best_cost && std::abs(k - middle) < std::abs(best - middle))) {
      best = k;
      best_cost = larger;
    }
  }
  return best;
}

// One long document in a row of its own costs more attention than the rows
// of short documents together: that row alone is a half, wherever it is.
TEST(SplitIntoHalvesTest, LongDocumentRowIsAHalfOfItsOwn) {
  const model::ModelConfig config = SmallConfig();
  const int seq_len = 2048;
  const std::vector<int> shorts(seq_len / 16, 16);
  const std::vector<std::vector<int>> long_first = {{seq_len}, shorts, shorts, shorts};
  const std::vector<std::vector<int>> long_last = {shorts, shorts, shorts, {seq_len}};
  for (const auto& [rows, expected] : {std::make_pair(long_first, 1), std::make_pair(long_last, 3)}) {
    ASSERT_EQ(ExpectedSplitRow(rows, seq_len, config), expected);  // not today's ceil(B/2) = 2
    auto halves = SplitIntoHalves(RowsOfDocuments(rows, seq_len), config);
    ASSERT_TRUE(halves.ok()) << halves.status();
    EXPECT_EQ((*halves)[0].batch_size, expected);
    EXPECT_EQ((*halves)[1].batch_size, 4 - expected);
    EXPECT_EQ((*halves)[expected == 1 ? 0 : 1].attention_tasks.size(), 1u);
  }
}

TEST(SplitIntoHalvesTest, EqualRowsSplitAtTheMiddle) {
  const model::ModelConfig config = SmallConfig();
  for (int b = 2; b <= 7; ++b) {
    const std::vector<std::vector<int>> rows(b, std::vector<int>{100, 28});
    auto halves = SplitIntoHalves(RowsOfDocuments(rows, 128), config);
    ASSERT_TRUE(halves.ok()) << halves.status();
    EXPECT_EQ((*halves)[0].batch_size, (b + 1) / 2) << b << " rows";
  }
}

// Random document lengths (some rows padded): the split is the brute-force
// cheapest one.
TEST(SplitIntoHalvesTest, RandomRowsSplitWhereTheLargerHalfIsCheapest) {
  const model::ModelConfig config = SmallConfig();
  std::mt19937 rng(7);
  int off_middle = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int b = 2 + static_cast<int>(rng() % 7);
    const int seq_len = 64 << (rng() % 5);
    std::vector<std::vector<int>> rows(b);
    for (std::vector<int>& row : rows) {
      // Short or row-long documents, so that rows differ a lot.
      const int longest = rng() % 3 == 0 ? seq_len : 1 + seq_len / 8;
      for (int used = 0; used < seq_len && rng() % 9 != 0;) {
        row.push_back(std::min(seq_len - used, 1 + static_cast<int>(rng() % longest)));
        used += row.back();
      }
    }
    const int expected = ExpectedSplitRow(rows, seq_len, config);
    off_middle += expected != (b + 1) / 2 ? 1 : 0;
    auto halves = SplitIntoHalves(RowsOfDocuments(rows, seq_len), config);
    ASSERT_TRUE(halves.ok()) << halves.status();
    EXPECT_EQ((*halves)[0].batch_size, expected) << "trial " << trial;
  }
  EXPECT_GT(off_middle, 20);  // the cost, not the row count, decided
}

// Colocated: the default two-phase calls compute in Start.
TEST(PingPongScheduleTest, ColocatedEqualsWholeMicroBatches) {
  const model::ModelConfig config = SmallConfig();
  std::mt19937 rng(2);
  std::vector<model::ModelBatch> batches;
  for (int rows : {4, 3, 1, 2}) batches.push_back(MakeBatch(rng, config, rows, 64));
  model::LocalCoreAttention local(nullptr);
  const ModelRun expected = Train(config, batches, local, /*ping_pong=*/false);
  const ModelRun got = Train(config, batches, local, /*ping_pong=*/true);
  ExpectEquivalent(config, got, expected, "colocated");
}

// 2 workers x 2 attention servers in one process: every worker's ping-pong
// micro-batches (with a one-row plain one among them) on the servers equal
// its colocated whole micro-batches; then checks that the exchanges of the
// two halves were in flight at once.
TEST(PingPongScheduleTest, DisaggregatedEqualsColocatedAndOverlapsTheHalves) {
  const model::ModelConfig config = SmallConfig();
  const int workers = 2, servers = 2;
  const ColocatedRuns colocated = TrainColocated(config, workers, 3);
  std::vector<ModelRun> remote(workers);
  attention::InProcessAttentionCluster cluster;
  cluster.workers = workers;
  cluster.servers = servers;
  cluster.options.n_layers = config.n_layers;
  cluster.options.tolerance = 0.0;  // split documents over the servers
  std::vector<std::vector<ExchangeEvent>> events(workers);  // each on its worker's thread
  cluster.on_exchange_event = [&](int w, const ExchangeEvent& e) { events[w].push_back(e); };
  auto outcomes = attention::RunInProcessAttentionCluster(
      cluster, [&](int w, attention::DisaggregatedCoreAttention& executor) {
        remote[w] = Train(config, colocated.batches[w], executor, /*ping_pong=*/true);
      });
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  for (const attention::ServerOutcome& outcome : *outcomes) {
    EXPECT_TRUE(outcome.served.ok()) << outcome.served;
    // 3 split micro-batches (2 halves each) + 1 whole one.
    EXPECT_EQ(outcome.stats.micro_batches, 7);
  }
  for (int w = 0; w < workers; ++w) {
    ExpectEquivalent(config, remote[w], colocated.results[w], absl::StrCat("worker ", w));
  }

  // Event order, per worker: every half-B call's requests go out before the
  // worker waits for half A's same call, and half A's next call before the
  // worker waits for half B's — two exchanges in flight at once.
  for (int w = 0; w < workers; ++w) {
    // (kind, micro_batch, pass, layer) -> position; keyed by micro-batch so
    // the three split micro-batches are checked separately.
    std::map<std::tuple<ExchangeEvent::Kind, uint64_t, Pass, int>, size_t> at;
    int in_flight = 0, most_in_flight = 0;
    for (size_t i = 0; i < events[w].size(); ++i) {
      const ExchangeEvent& e = events[w][i];
      at[{e.kind, e.header.micro_batch, e.header.pass, e.header.layer}] = i;
      if (e.kind == ExchangeEvent::Kind::kRequestsSent) ++in_flight;
      if (e.kind == ExchangeEvent::Kind::kRepliesReceived) --in_flight;
      most_in_flight = std::max(most_in_flight, in_flight);
    }
    EXPECT_EQ(most_in_flight, 2) << "worker " << w;
    auto pos = [&](ExchangeEvent::Kind kind, uint64_t micro_batch, Pass pass, int layer) {
      auto it = at.find({kind, micro_batch, pass, layer});
      EXPECT_NE(it, at.end()) << "worker " << w << " micro-batch " << micro_batch << " layer "
                              << layer;
      return it == at.end() ? size_t{0} : it->second;
    };
    const auto sent = ExchangeEvent::Kind::kRequestsSent;
    const auto waiting = ExchangeEvent::Kind::kWaitingForReplies;
    const int layers = config.n_layers;
    // Micro-batch numbers: 0/1 halves, 2/3 halves (forward only), 4 whole, 5/6 halves.
    for (uint64_t a : {0u, 2u, 5u}) {
      const uint64_t b = a + 1;
      for (int l = 0; l < layers; ++l) {
        EXPECT_LT(pos(sent, a, Pass::kForward, l), pos(sent, b, Pass::kForward, l));
        EXPECT_LT(pos(sent, b, Pass::kForward, l), pos(waiting, a, Pass::kForward, l))
            << "worker " << w << ": half B's forward " << l << " not out before waiting for A";
        if (l + 1 < layers) {
          EXPECT_LT(pos(sent, a, Pass::kForward, l + 1), pos(waiting, b, Pass::kForward, l));
        }
      }
      if (a == 2) continue;  // validation: no backward
      for (int l = layers - 1; l >= 0; --l) {
        EXPECT_LT(pos(sent, a, Pass::kBackward, l), pos(sent, b, Pass::kBackward, l));
        EXPECT_LT(pos(sent, b, Pass::kBackward, l), pos(waiting, a, Pass::kBackward, l))
            << "worker " << w << ": half B's backward " << l << " not out before waiting for A";
        if (l > 0) {
          EXPECT_LT(pos(sent, a, Pass::kBackward, l - 1), pos(waiting, b, Pass::kBackward, l));
        }
      }
    }
  }
}

// IN_PLACE: 3 workers serve each other's attention; every worker's
// ping-pong micro-batches (a one-row plain one among them) equal its
// colocated whole micro-batches, and work really moved between workers.
TEST(PingPongScheduleTest, InPlaceEqualsColocated) {
  const model::ModelConfig config = SmallConfig();
  const int workers = 3;
  const ColocatedRuns colocated = TrainColocated(config, workers, 5);
  std::vector<ModelRun> in_place(workers);
  attention::InPlaceOptions options;
  options.n_layers = config.n_layers;
  options.tolerance = 0.0;  // move work between workers, splitting documents
  std::vector<attention::InPlaceStats> stats(workers);
  absl::Status ranks = comm::RunLoopbackRanks(
      workers, "ping-pong/attn-inplace",
      [&](int w, std::unique_ptr<comm::Communicator> communicator) {
        auto executor = attention::InPlaceCoreAttention::Create(std::move(communicator), options);
        ASSERT_TRUE(executor.ok()) << executor.status();
        in_place[w] = Train(config, colocated.batches[w], **executor, /*ping_pong=*/true);
        stats[w] = (*executor)->stats();
      });
  ASSERT_TRUE(ranks.ok()) << ranks;
  int64_t shipped = 0;
  for (int w = 0; w < workers; ++w) {
    ExpectEquivalent(config, in_place[w], colocated.results[w], absl::StrCat("worker ", w));
    // 3 split micro-batches (2 halves each) + 1 whole one.
    EXPECT_EQ(stats[w].micro_batches, 7) << "worker " << w;
    shipped += stats[w].tasks_shipped;
  }
  EXPECT_GT(shipped, 0) << "every task stayed at home: nothing was exchanged";
}

// An in-place worker finishing a half it never started, or starting a
// half's call while that half's previous one is unfinished, is refused (and
// the communicator aborted: the peers are out of step).
TEST(PingPongScheduleTest, InPlaceHalvesMustAlternate) {
  const model::ModelConfig config = SmallConfig();
  std::mt19937 rng(6);
  const model::ModelBatch batch = MakeBatch(rng, config, 2, 64);
  auto model = model::Transformer::Create(config);
  ASSERT_TRUE(model.ok());
  model->InitializeWeights(1);
  for (const bool start_first : {false, true}) {
    // One worker for the second case: a peer's abort must not race its start.
    const int workers = start_first ? 1 : 2;
    std::vector<absl::Status> refused(workers);
    absl::Status ranks = comm::RunLoopbackRanks(
        workers, absl::StrCat("ping-pong-order-", start_first, "/attn-inplace"),
        [&](int w, std::unique_ptr<comm::Communicator> communicator) {
          attention::InPlaceOptions options;
          options.n_layers = config.n_layers;
          auto executor =
              attention::InPlaceCoreAttention::Create(std::move(communicator), options);
          ASSERT_TRUE(executor.ok()) << executor.status();
          if (!start_first) {
            refused[w] = (*executor)->FinishForward(1);
            return;
          }
          model::Activations a;
          a.batch = batch;
          ASSERT_TRUE(model->EmbedForward(a).ok());
          ASSERT_TRUE(model->PreAttentionForward(0, a).ok());
          ASSERT_TRUE(model->StartCoreAttentionForward(0, /*half=*/0, **executor, a).ok());
          refused[w] = model->StartCoreAttentionForward(0, /*half=*/0, **executor, a);
        });
    ASSERT_TRUE(ranks.ok()) << ranks;
    const std::string expected = start_first
                                     ? "half A's next call while an exchange is unfinished"
                                     : "finishing half B, which has no call started";
    for (int w = 0; w < workers; ++w) {
      EXPECT_EQ(refused[w].code(), absl::StatusCode::kFailedPrecondition) << refused[w];
      EXPECT_NE(refused[w].message().find(expected), std::string::npos) << refused[w];
    }
  }
}

// Half B's call without half A's first: the server refuses and says why.
TEST(PingPongScheduleTest, HalfBBeforeHalfAIsRefused) {
  const model::ModelConfig config = SmallConfig();
  std::mt19937 rng(4);
  model::ModelBatch batch = MakeBatch(rng, config, 1, 64);
  auto model = model::Transformer::Create(config);
  ASSERT_TRUE(model.ok());
  model->InitializeWeights(1);
  attention::InProcessAttentionCluster cluster;
  cluster.options.n_layers = config.n_layers;
  absl::Status finished;
  auto outcomes = attention::RunInProcessAttentionCluster(
      cluster, [&](int, attention::DisaggregatedCoreAttention& executor) {
        model::Activations a;
        a.batch = batch;
        ASSERT_TRUE(model->EmbedForward(a).ok());
        ASSERT_TRUE(model->PreAttentionForward(0, a).ok());
        absl::Status started = model->StartCoreAttentionForward(0, /*half=*/1, executor, a);
        finished = started.ok() ? executor.FinishForward(1) : started;
      });
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_FALSE(finished.ok());
  EXPECT_NE(finished.message().find("half B's call right after the same call of half A"),
            std::string::npos)
      << finished;
  EXPECT_FALSE((*outcomes)[0].served.ok());
}

}  // namespace
}  // namespace corescape::train
