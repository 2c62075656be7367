// Speed weights: worker 0's weights travel with its document lengths, and
// every participant — workers and servers, each rank with its own UCX
// transport on loopback — plans each micro-batch with them, so all compute
// the same, speed-weighted plan. Malformed weights are refused naming the
// problem, by the setter and on the wire.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/attention/attention_server_session.h"
#include "runtime/attention/disaggregated_core_attention.h"
#include "runtime/attention/documents_message.h"
#include "runtime/attention/executor_test_calls.h"
#include "runtime/attention/versioned_speed_weights.h"
#include "runtime/comm/loopback_ranks.h"
#include "runtime/model/core_attention_executor.h"

namespace corescape::attention {
namespace {

using ::testing::HasSubstr;

// One thread per rank, each with its own transport and communicator.
void RunRanks(int world,
              const std::function<void(int rank, std::unique_ptr<comm::Communicator>)>& body) {
  absl::Status ranks = comm::RunLoopbackRanks(world, "weights/attn", body);
  ASSERT_TRUE(ranks.ok()) << ranks;
}

const kernels::AttentionShape kShape{4, 2, 8, 0.35f};

// Whole documents back to back: one long one (so the planner can split
// it), then short ones.
RandomBatch MakeBatch(std::mt19937& rng, int64_t rows) {
  RandomBatch b;
  b.rows = rows;
  for (int64_t row = 0; row < rows;) {
    const int64_t length =
        std::min<int64_t>(rows - row, b.tasks.empty() ? 120 + rng() % 60 : 1 + rng() % 40);
    b.tasks.push_back({0, length, row, row});
    row += length;
  }
  FillRandomTensors(rng, kShape, b);
  return b;
}

// What one participant planned for one micro-batch.
struct Planned {
  uint64_t version = 0;
  std::vector<planner::PlannedTask> tasks;
  std::vector<double> server_flops;
};
Planned Capture(const MicroBatchPlan& plan) {
  Planned p;
  p.version = plan.speed_weights_version;
  p.tasks = plan.plan.tasks;
  for (const planner::ServerLoad& load : plan.plan.servers) p.server_flops.push_back(load.flops);
  return p;
}

// Layer 0's forward of `b` through `executor` (a new micro-batch) gives
// what the local kernel gives.
void ForwardMatchesLocal(DisaggregatedCoreAttention& executor, const RandomBatch& b) {
  Outputs got = ZeroOutputs(kShape, b.rows), expected = ZeroOutputs(kShape, b.rows);
  absl::Status s = executor.Forward(ForwardCall(0, kShape, b, got));
  ASSERT_TRUE(s.ok()) << s;
  model::LocalCoreAttention local(nullptr);
  ASSERT_TRUE(local.Forward(ForwardCall(0, kShape, b, expected)).ok());
  for (size_t i = 0; i < got.o.size(); ++i) ASSERT_NEAR(got.o[i], expected.o[i], 1e-5) << i;
}

// Serves as an attention server (tolerance 0) until the workers are done,
// appending the plan of every micro-batch with work here to `planned`
// (under `mu`); returns where the plans came from.
PlanSourceCounts ServeCapturingPlans(comm::Communicator* communicator, int workers, int servers,
                                     absl::Mutex& mu, std::vector<Planned>& planned) {
  ServerSessionOptions options;
  options.workers = workers;
  options.servers = servers;
  options.tolerance = 0.0;
  AttentionServerSession* session = nullptr;
  // Fires once a micro-batch with work here is over, its plan still current.
  options.on_micro_batch_timing = [&](const MicroBatchTiming&) {
    absl::MutexLock lock(&mu);
    planned.push_back(Capture(*session->current_plan()));
  };
  AttentionServerSession served(communicator, options);
  session = &served;
  absl::Status s = served.Serve();
  EXPECT_TRUE(s.ok()) << s;
  return served.stats().plan_sources;
}

TEST(SpeedWeightedPlanTest, EveryParticipantPlansWithWorkerZerosWeights) {
  constexpr int kWorkers = 2, kServers = 2, kMicroBatches = 2;
  std::mt19937 rng(17);
  std::vector<std::vector<RandomBatch>> batches(kMicroBatches);  // [micro-batch][worker]
  for (auto& per_worker : batches) {
    for (int w = 0; w < kWorkers; ++w) per_worker.push_back(MakeBatch(rng, 400));
  }
  absl::Mutex mu;
  // [participant][micro-batch]; participants 0..W-1 workers, then servers.
  std::vector<std::vector<Planned>> planned(kWorkers + kServers);
  RunRanks(kWorkers + kServers, [&](int rank, std::unique_ptr<comm::Communicator> communicator) {
    if (rank >= kWorkers) {
      ServeCapturingPlans(communicator.get(), kWorkers, kServers, mu, planned[rank]);
      return;
    }
    DisaggregatedOptions options;
    options.workers = kWorkers;
    options.servers = kServers;
    options.n_layers = 1;
    options.tolerance = 0.0;  // balance exactly, splitting documents
    auto executor = DisaggregatedCoreAttention::Create(std::move(communicator), options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    for (int m = 0; m < kMicroBatches; ++m) {
      if (m == 1) {
        // Worker 0's weights win; worker 1's (different) ones are not used.
        const VersionedSpeedWeights mine = rank == 0 ? VersionedSpeedWeights{7, {2.0, 1.0}}
                                            : VersionedSpeedWeights{9, {1.0, 3.0}};
        ASSERT_TRUE((*executor)->SetSpeedWeights(mine).ok());
      }
      // The weighted plan still computes exactly what the local kernel does.
      ASSERT_NO_FATAL_FAILURE(ForwardMatchesLocal(**executor, batches[m][rank]));
      absl::MutexLock lock(&mu);
      planned[rank].push_back(Capture(*(*executor)->current_plan()));
    }
  });

  const std::vector<uint64_t> versions = {0, 7};
  const std::vector<double> slow_share = {0.5, 1.0 / 3};  // server 1's share of the cost
  for (int p = 0; p < kWorkers + kServers; ++p) {
    ASSERT_EQ(planned[p].size(), static_cast<size_t>(kMicroBatches)) << "participant " << p;
    for (int m = 0; m < kMicroBatches; ++m) {
      const Planned& got = planned[p][m];
      EXPECT_EQ(got.version, versions[m]) << "participant " << p << " micro-batch " << m;
      const double total = got.server_flops[0] + got.server_flops[1];
      EXPECT_NEAR(got.server_flops[1] / total, slow_share[m], 0.02)
          << "participant " << p << " micro-batch " << m;
      // Identical plans: the same tasks on the same servers, the same costs.
      EXPECT_EQ(got.tasks, planned[0][m].tasks) << "participant " << p << " micro-batch " << m;
      EXPECT_EQ(got.server_flops, planned[0][m].server_flops) << "participant " << p;
    }
  }
}

// Worker 0 ships the scheduler's plans: every participant runs a fitting
// one as it is (even when the participants would plan otherwise), and
// plans itself — all alike — when one does not fit the documents.
TEST(ShippedPlanTest, EveryParticipantRunsAFittingScheduledPlanAndPlansOtherwise) {
  constexpr int kWorkers = 2, kServers = 2, kMicroBatches = 3;
  std::mt19937 rng(29);
  std::vector<std::vector<RandomBatch>> batches(kMicroBatches);  // [micro-batch][worker]
  for (auto& per_worker : batches) {
    for (int w = 0; w < kWorkers; ++w) per_worker.push_back(MakeBatch(rng, 300));
  }
  // Micro-batch 0: worker 0's documents whole on server 1, worker 1's on
  // server 0 — not what the balancing planner would do.
  ShippedPlan fitting{41, 6, {}};
  for (int w = 0; w < kWorkers; ++w) {
    for (size_t d = 0; d < batches[0][w].tasks.size(); ++d) {
      fitting.tasks.push_back({w, static_cast<int32_t>(d), 0, batches[0][w].tasks[d].q_end, 1 - w});
    }
  }
  // Micro-batch 1: right for worker 0, but planned for another worker 1
  // (its first document one token longer).
  ShippedPlan stale{42, 6, {}};
  for (int w = 0; w < kWorkers; ++w) {
    for (size_t d = 0; d < batches[1][w].tasks.size(); ++d) {
      const int64_t length = batches[1][w].tasks[d].q_end + (w == 1 && d == 0 ? 1 : 0);
      stale.tasks.push_back({w, static_cast<int32_t>(d), 0, length, 0});
    }
  }
  absl::Mutex mu;
  std::vector<std::vector<Planned>> planned(kWorkers + kServers);  // [participant][micro-batch]
  std::vector<MicroBatchPlan::Source> worker0_sources;
  std::vector<PlanSourceCounts> counts(kWorkers + kServers);
  RunRanks(kWorkers + kServers, [&](int rank, std::unique_ptr<comm::Communicator> communicator) {
    if (rank >= kWorkers) {
      const PlanSourceCounts served =
          ServeCapturingPlans(communicator.get(), kWorkers, kServers, mu, planned[rank]);
      absl::MutexLock lock(&mu);
      counts[rank] = served;
      return;
    }
    DisaggregatedOptions options;
    options.workers = kWorkers;
    options.servers = kServers;
    options.n_layers = 1;
    options.tolerance = 0.0;
    auto executor = DisaggregatedCoreAttention::Create(std::move(communicator), options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    // Only worker 0's plans travel.
    const absl::StatusCode offered = rank == 0 ? absl::StatusCode::kOk
                                               : absl::StatusCode::kFailedPrecondition;
    EXPECT_EQ((*executor)->OfferShippedPlan(fitting).code(), offered);
    EXPECT_EQ((*executor)->OfferShippedPlan(stale).code(), offered);
    for (int m = 0; m < kMicroBatches; ++m) {
      ASSERT_NO_FATAL_FAILURE(ForwardMatchesLocal(**executor, batches[m][rank]));
      absl::MutexLock lock(&mu);
      planned[rank].push_back(Capture(*(*executor)->current_plan()));
      if (rank == 0) worker0_sources.push_back((*executor)->current_plan()->source);
    }
    absl::MutexLock lock(&mu);
    counts[rank] = (*executor)->plan_sources();
  });

  std::vector<planner::PlannedTask> expected = fitting.tasks;
  std::sort(expected.begin(), expected.end(), [](const auto& x, const auto& y) {
    return std::tie(x.server, x.worker, x.document) < std::tie(y.server, y.worker, y.document);
  });
  EXPECT_EQ(worker0_sources,
            (std::vector<MicroBatchPlan::Source>{MicroBatchPlan::Source::kScheduler,
                                                 MicroBatchPlan::Source::kParticipants,
                                                 MicroBatchPlan::Source::kParticipants}));
  for (int p = 0; p < kWorkers + kServers; ++p) {
    ASSERT_EQ(planned[p].size(), static_cast<size_t>(kMicroBatches)) << "participant " << p;
    EXPECT_EQ(planned[p][0].tasks, expected) << "participant " << p;
    EXPECT_EQ(planned[p][0].version, 6u) << "participant " << p;
    for (int m = 1; m < kMicroBatches; ++m) {
      // Planned here, identically, and balanced (tolerance 0 splits the long
      // documents), unlike the stale plan that put everything on server 0.
      EXPECT_EQ(planned[p][m].tasks, planned[0][m].tasks) << "participant " << p << " mb " << m;
      EXPECT_NEAR(planned[p][m].server_flops[0] /
                      (planned[p][m].server_flops[0] + planned[p][m].server_flops[1]),
                  0.5, 0.02)
          << "participant " << p << " micro-batch " << m;
    }
    EXPECT_EQ(counts[p].scheduler, 1) << "participant " << p;
    EXPECT_EQ(counts[p].participants, 2) << "participant " << p;
    EXPECT_EQ(counts[p].Describe(),
              "1 of 3 micro-batches on the scheduler's plans, 2 planned here (validation, and "
              "plans late or not fitting)");
  }
}

// With shipping off (validation), worker 0 keeps the plans queued and the
// micro-batch is planned here; back on, the next micro-batch with those
// documents runs the scheduler's plan.
TEST(ShippedPlanTest, NothingIsShippedWhileShippingIsOff) {
  std::mt19937 rng(33);
  const RandomBatch b = MakeBatch(rng, 200);
  ShippedPlan plan{7, 0, {}};
  for (size_t d = 0; d < b.tasks.size(); ++d) {
    plan.tasks.push_back({0, static_cast<int32_t>(d), 0, b.tasks[d].q_end, 1});
  }
  std::vector<MicroBatchPlan::Source> sources;
  RunRanks(3, [&](int rank, std::unique_ptr<comm::Communicator> communicator) {
    if (rank >= 1) {
      absl::Mutex mu;
      std::vector<Planned> ignored;
      ServeCapturingPlans(communicator.get(), 1, 2, mu, ignored);
      return;
    }
    DisaggregatedOptions options;
    options.servers = 2;
    options.tolerance = 0.0;  // as the servers (ServeCapturingPlans)
    auto executor = DisaggregatedCoreAttention::Create(std::move(communicator), options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    ASSERT_TRUE((*executor)->OfferShippedPlan(plan).ok());
    for (const bool ship : {false, true}) {
      (*executor)->ShipSchedulerPlans(ship);
      ASSERT_NO_FATAL_FAILURE(ForwardMatchesLocal(**executor, b));
      sources.push_back((*executor)->current_plan()->source);
    }
  });
  EXPECT_EQ(sources, (std::vector<MicroBatchPlan::Source>{MicroBatchPlan::Source::kParticipants,
                                                          MicroBatchPlan::Source::kScheduler}));
}

TEST(SpeedWeightedPlanTest, SetterRefusesMalformedWeightsNamingTheProblem) {
  RunRanks(2, [&](int rank, std::unique_ptr<comm::Communicator> communicator) {
    if (rank == 1) {
      ServerSessionOptions options;
      AttentionServerSession session(communicator.get(), options);
      EXPECT_TRUE(session.Serve().ok());
      return;
    }
    auto executor = DisaggregatedCoreAttention::Create(std::move(communicator), {});
    ASSERT_TRUE(executor.ok()) << executor.status();
    DisaggregatedCoreAttention& attention = **executor;
    absl::Status s = attention.SetSpeedWeights({3, {1.0, 1.0}});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("speed weights version 3: 2 speed weights for 1 "
                                       "attention servers"));
    s = attention.SetSpeedWeights({4, {std::numeric_limits<double>::quiet_NaN()}});
    EXPECT_THAT(s.message(), HasSubstr("speed weight [0] is nan; weights must be finite and > 0"));
    s = attention.SetSpeedWeights({5, {0.0}});
    EXPECT_THAT(s.message(), HasSubstr("speed weight [0] is 0"));
    s = attention.SetSpeedWeights({6, {-1.0}});
    EXPECT_THAT(s.message(), HasSubstr("speed weight [0] is -1"));
    s = attention.SetSpeedWeights({7, {std::numeric_limits<double>::infinity()}});
    EXPECT_THAT(s.message(), HasSubstr("speed weight [0] is inf"));
    // Refused weights change nothing: the next micro-batch plans with equal ones.
    std::mt19937 rng(3);
    const RandomBatch b = MakeBatch(rng, 64);
    Outputs out = ZeroOutputs(kShape, b.rows);
    ASSERT_TRUE(attention.Forward(ForwardCall(0, kShape, b, out)).ok());
    EXPECT_EQ(attention.current_plan()->speed_weights_version, 0u);
  });
}

// A worker 0 that sends malformed weights on the wire: the server refuses
// the micro-batch naming the problem (and aborts the communicator).
TEST(SpeedWeightedPlanTest, ServerRefusesMalformedWeightsOnTheWire) {
  struct Case {
    int32_t announced;            // num_speed_weights in the header
    std::vector<double> weights;  // what follows the lengths
    std::string message;
  };
  const std::vector<Case> cases = {
      {2, {1.0, std::numeric_limits<double>::quiet_NaN()},
       "speed weight [1] is nan; weights must be finite and > 0"},
      {2, {1.0, -2.0}, "speed weight [1] is -2"},
      {2, {1e304, 0.75}, "speed weight [0] is 1e+304; relative weights must lie in [0.01, 100]"},
      {3, {1.0, 1.0, 1.0}, "announces 3 speed weights with forward layer 0 of micro-batch 0 "
                           "(exchange 0); expected 2 (one per attention server)"},
      {0, {}, "announces 0 speed weights"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    std::vector<absl::Status> served(3);
    RunRanks(3, [&](int rank, std::unique_ptr<comm::Communicator> communicator) {
      if (rank >= 1) {
        ServerSessionOptions options;
        options.servers = 2;
        AttentionServerSession session(communicator.get(), options);
        served[rank] = session.Serve();
        return;
      }
      // Worker 0, by hand: documents header and message, then the request header.
      ExchangeHeader h;
      h.n_layers = 1;
      h.n_heads = kShape.n_heads;
      h.n_kv_heads = kShape.n_kv_heads;
      h.head_dim = kShape.head_dim;
      h.softmax_scale = kShape.softmax_scale;
      DocumentsMessage documents;
      documents.lengths = {16};
      documents.weights = VersionedSpeedWeights{1, c.weights};
      const std::vector<int64_t> message = EncodeDocumentsMessage(documents, h);
      h.num_speed_weights = c.announced;
      const HeaderBytes announce = EncodeHeader(h);
      h.num_documents = 0;
      h.num_speed_weights = 0;
      const HeaderBytes request = EncodeHeader(h);
      for (int server = 1; server <= 2; ++server) {
        // The server fails before it reads what it did not expect: no Wait.
        (void)communicator->SendAsync(server, kDocumentsHeaderTag, announce.data(), kHeaderBytes);
        if (c.announced == static_cast<int32_t>(c.weights.size())) {
          (void)communicator->SendAsync(server, kDocumentsTag, message.data(),
                                        message.size() * sizeof(int64_t));
        }
        (void)communicator->SendAsync(server, kHeaderTag, request.data(), kHeaderBytes);
      }
      // The servers abort the communicator once they refuse the exchange.
      std::array<char, kHeaderBytes> reply;
      auto receive = communicator->RecvAsync(1, kReplyHeaderTag, reply.data(), kHeaderBytes);
      if (receive.ok()) (void)(*receive)->Wait();
    });
    // Each server refuses it, or hears of the other's refusal first.
    int refused = 0;
    for (int server = 1; server <= 2; ++server) {
      refused += served[server].code() == absl::StatusCode::kDataLoss;
      EXPECT_THAT(served[server].message(), HasSubstr(c.message));
      EXPECT_THAT(served[server].message(), HasSubstr("worker rank 0"));
    }
    EXPECT_GE(refused, 1) << served[1] << "; " << served[2];
  }
}

TEST(SpeedWeightsTest, HeaderCarriesTheCountOnlyWithTheFirstForward) {
  ExchangeHeader h;
  h.n_layers = 2;
  h.n_heads = 4;
  h.n_kv_heads = 2;
  h.head_dim = 8;
  h.softmax_scale = 0.35f;
  h.num_documents = 3;
  h.num_speed_weights = 5;
  auto decoded = DecodeHeader(EncodeHeader(h), "peer");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->num_speed_weights, 5);
  h.num_speed_weights = -1;
  EXPECT_THAT(DecodeHeader(EncodeHeader(h), "peer").status().message(),
              HasSubstr("num_speed_weights -1 is not in [0, 65536]"));
  h.num_speed_weights = 2;
  h.num_documents = 0;
  h.layer = 1;
  EXPECT_THAT(DecodeHeader(EncodeHeader(h), "peer").status().message(),
              HasSubstr("speed weights are sent only with the forward of layer 0"));
}

TEST(SpeedWeightsTest, DocumentsMessageRoundTrip) {
  ExchangeHeader announce;
  const VersionedSpeedWeights weights{42, {0.5, 1.25, 1.25}};
  const std::vector<int64_t> words =
      EncodeDocumentsMessage(DocumentsMessage{{10, 20}, weights, std::nullopt}, announce);
  EXPECT_EQ(announce.num_documents, 2);
  EXPECT_EQ(announce.num_speed_weights, 3);
  EXPECT_EQ(announce.payload_bytes, 0);
  auto size = ExpectedDocumentsWords(announce, 0, DocumentsFormat::Disaggregated(3), "worker 0");
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, static_cast<int64_t>(words.size()));
  auto decoded = DecodeDocumentsMessage(words, announce, DocumentsFormat::Disaggregated(3), "worker 0");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->lengths, (std::vector<int64_t>{10, 20}));
  ASSERT_TRUE(decoded->weights.has_value());
  EXPECT_EQ(*decoded->weights, weights);
  EXPECT_EQ(decoded->weights->Describe(), "version 42 (0.500, 1.250, 1.250)");
  // Other workers send lengths only; weights from them are refused.
  announce.num_speed_weights = 0;
  EXPECT_EQ(*ExpectedDocumentsWords(announce, 1, DocumentsFormat::Disaggregated(3), "worker 1"), 2);
  announce.num_speed_weights = 3;
  EXPECT_THAT(ExpectedDocumentsWords(announce, 1, DocumentsFormat::Disaggregated(3), "worker 1").status().message(),
              HasSubstr("worker 1 announces 3 speed weights"));
  EXPECT_THAT(ExpectedDocumentsWords(announce, 1, DocumentsFormat::Disaggregated(3), "worker 1").status().message(),
              HasSubstr("only worker 0 sends them"));
}

}  // namespace
}  // namespace corescape::attention
