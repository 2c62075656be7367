// The scheduler's plans on the wire and in worker 0's queue, and how a
// participant decides between a shipped plan and its own.

#include "runtime/attention/shipped_plan.h"

#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/attention/announced_micro_batch.h"
#include "runtime/attention/documents_message.h"

namespace corescape::attention {
namespace {

using ::testing::HasSubstr;

const kernels::AttentionShape kShape{4, 2, 8, 0.35f};

// Whole documents of `lengths` (worker w's) on `server`.
ShippedPlan WholeDocuments(int64_t step, const std::vector<std::vector<int64_t>>& lengths,
                           int32_t server) {
  ShippedPlan plan{step, 3, {}};
  for (size_t w = 0; w < lengths.size(); ++w) {
    for (size_t d = 0; d < lengths[w].size(); ++d) {
      plan.tasks.push_back({static_cast<int32_t>(w), static_cast<int32_t>(d), 0, lengths[w][d],
                            server});
    }
  }
  return plan;
}

TEST(ShippedPlanTest, EncodesAndDecodesBitForBit) {
  ShippedPlan plan{17, 5, {{0, 0, 0, 40, 1}, {0, 0, 40, 100, 0}, {1, 2, 0, 9, 1}}};
  const std::vector<int64_t> words = EncodeShippedPlan(plan);
  EXPECT_EQ(words.size(), 3u + 5u * 3u);
  auto decoded = DecodeShippedPlan(words, "worker 0");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, plan);
}

TEST(ShippedPlanTest, DecodeRefusesMalformedWordsNamingThePeer) {
  std::vector<int64_t> words = EncodeShippedPlan({1, 0, {{0, 0, 0, 8, 0}}});
  words.pop_back();
  auto decoded = DecodeShippedPlan(words, "worker 0 (host:1)");
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(decoded.status().message(),
              HasSubstr("attention plan from worker 0 (host:1): 7 words for 1 tasks"));
  words = EncodeShippedPlan({1, 0, {{0, 0, 0, 8, 0}}});
  words[3] = int64_t{1} << 40;  // worker
  EXPECT_THAT(DecodeShippedPlan(words, "w").status().message(),
              HasSubstr("task 0 names worker 1099511627776"));
  EXPECT_THAT(DecodeShippedPlan(std::vector<int64_t>{1, 2}, "w").status().message(),
              HasSubstr("2 words, fewer than its header"));
  EXPECT_THAT(DecodeShippedPlan(std::vector<int64_t>{1, 2, -1}, "w").status().message(),
              HasSubstr("3 words for -1 tasks"));
}

TEST(ShippedPlanTest, PlannedDocumentLengthsFollowTheLargestQueryEnd) {
  const ShippedPlan plan{1, 0, {{0, 1, 30, 50, 0}, {0, 1, 0, 30, 1}, {0, 0, 0, 7, 0},
                               {1, 0, 0, 99, 0}}};
  EXPECT_EQ(PlannedDocumentLengths(plan, 0), (std::vector<int64_t>{7, 50}));
  EXPECT_EQ(PlannedDocumentLengths(plan, 1), (std::vector<int64_t>{99}));
  EXPECT_TRUE(PlannedDocumentLengths(plan, 2).empty());
}

TEST(ShippedPlanQueueTest, FindsTheOldestMatchAndConsumingDropsThePlansBeforeIt) {
  ShippedPlanQueue queue;
  queue.Offer(WholeDocuments(1, {{10, 20}, {5}}, 0));
  queue.Offer(WholeDocuments(2, {{30}, {5}}, 0));
  queue.Offer(WholeDocuments(3, {{10, 20}, {6}}, 1));
  queue.Offer(WholeDocuments(4, {{40}, {5}}, 0));
  // A micro-batch nobody planned (validation): nothing found.
  EXPECT_FALSE(queue.FindMatching(std::vector<int64_t>{11}).has_value());
  // Found but not used (it did not fit the other workers): still queued.
  auto found = queue.FindMatching(std::vector<int64_t>{30});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->plan.step, 2);
  EXPECT_EQ(queue.size(), 4u);
  // Used: step 1's plan is past too.
  queue.Consume(found->id);
  EXPECT_EQ(queue.size(), 2u);
  found = queue.FindMatching(std::vector<int64_t>{10, 20});
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->plan.step, 3);
  queue.Consume(found->id);
  EXPECT_EQ(queue.size(), 1u);
}

TEST(ShippedPlanQueueTest, KeepsOnlyTheNewestPlans) {
  ShippedPlanQueue queue(/*capacity=*/2);
  for (int64_t step = 1; step <= 3; ++step) queue.Offer(WholeDocuments(step, {{step}}, 0));
  EXPECT_EQ(queue.size(), 2u);
  EXPECT_FALSE(queue.FindMatching(std::vector<int64_t>{1}).has_value());
  EXPECT_EQ(queue.FindMatching(std::vector<int64_t>{2})->plan.step, 2);
}

TEST(DocumentsMessageTest, WorkerZerosPlanTravelsAfterItsWeights) {
  DocumentsMessage sent;
  sent.lengths = {12, 4};
  sent.weights = VersionedSpeedWeights{8, {1.5, 0.5}};
  sent.plan = WholeDocuments(9, {{12, 4}, {3}}, 1);
  ExchangeHeader announce;
  const std::vector<int64_t> words = EncodeDocumentsMessage(sent, announce);
  EXPECT_EQ(announce.num_documents, 2);
  EXPECT_EQ(announce.num_speed_weights, 2);
  EXPECT_EQ(announce.payload_bytes, 8 * (3 + 5 * 3));
  auto size = ExpectedDocumentsWords(announce, 0, DocumentsFormat::Disaggregated(2), "worker 0");
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, static_cast<int64_t>(words.size()));
  auto received = DecodeDocumentsMessage(words, announce, DocumentsFormat::Disaggregated(2), "worker 0");
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(received->lengths, sent.lengths);
  EXPECT_EQ(*received->weights, *sent.weights);
  EXPECT_EQ(*received->plan, *sent.plan);
}

TEST(DocumentsMessageTest, OnlyWorkerZeroShipsPlansOfWholeWords) {
  ExchangeHeader announce;
  announce.num_documents = 1;
  announce.payload_bytes = 8 * 8;
  auto size = ExpectedDocumentsWords(announce, 1, DocumentsFormat::Disaggregated(2), "worker 1");
  EXPECT_EQ(size.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(size.status().message(), HasSubstr("only worker 0 ships plans"));
  announce.num_speed_weights = 2;
  announce.payload_bytes = 12;
  EXPECT_THAT(ExpectedDocumentsWords(announce, 0, DocumentsFormat::Disaggregated(2), "worker 0").status().message(),
              HasSubstr("attention plan of 12 bytes"));
  announce.payload_bytes = int64_t{1} << 40;
  EXPECT_THAT(ExpectedDocumentsWords(announce, 0, DocumentsFormat::Disaggregated(2), "worker 0").status().message(),
              HasSubstr("not a whole number of words under"));
}

TEST(DocumentsMessageTest, InPlaceWorkersEachSendTheirOwnSpeedAndNoPlan) {
  const DocumentsFormat format = DocumentsFormat::InPlace();
  DocumentsMessage sent;
  sent.lengths = {30, 2};
  sent.weights = VersionedSpeedWeights{0, {1234.5}};
  ExchangeHeader announce;
  const std::vector<int64_t> words = EncodeDocumentsMessage(sent, announce);
  EXPECT_EQ(announce.num_speed_weights, 1);
  // Any worker may send its speed, not only worker 0.
  auto size = ExpectedDocumentsWords(announce, 1, format, "worker 1");
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, static_cast<int64_t>(words.size()));
  auto received = DecodeDocumentsMessage(words, announce, format, "worker 1");
  ASSERT_TRUE(received.ok()) << received.status();
  EXPECT_EQ(received->lengths, sent.lengths);
  EXPECT_EQ(*received->weights, *sent.weights);
  // Before it has measured one, a worker sends lengths only.
  ExchangeHeader unmeasured;
  EXPECT_EQ(EncodeDocumentsMessage(DocumentsMessage{{30, 2}, std::nullopt, std::nullopt},
                                   unmeasured)
                .size(),
            2u);
  EXPECT_EQ(*ExpectedDocumentsWords(unmeasured, 0, format, "worker 0"), 2);

  ExchangeHeader two_speeds = announce;
  two_speeds.num_speed_weights = 2;
  EXPECT_THAT(ExpectedDocumentsWords(two_speeds, 0, format, "worker 0").status().message(),
              HasSubstr("a worker sends at most its own"));
  ExchangeHeader with_plan = announce;
  with_plan.payload_bytes = 8 * 8;
  EXPECT_THAT(ExpectedDocumentsWords(with_plan, 0, format, "worker 0").status().message(),
              HasSubstr("in-place workers ship no plans"));
  std::vector<int64_t> bad = words;
  bad.back() = DoubleToWord(-1.0);
  auto refused = DecodeDocumentsMessage(bad, announce, format, "worker 1");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(refused.status().message(), HasSubstr("speed weights from worker 1"));
}

TEST(PlanAnnouncedMicroBatchTest, AdoptsAPlanThatCoversTheDocumentsExactly) {
  const std::vector<std::vector<int64_t>> documents = {{100, 20}, {60}};
  DocumentsMessage worker0;
  worker0.weights = VersionedSpeedWeights{4, {1.0, 1.0}};
  // Document 0 of worker 0 cut in two, on both servers.
  worker0.plan = ShippedPlan{12, 4, {{0, 0, 0, 70, 0}, {0, 0, 70, 100, 1}, {0, 1, 0, 20, 1},
                                     {1, 0, 0, 60, 0}}};
  PlanOptions options;
  options.servers = 2;
  std::string refusal = "stale";
  auto plan = PlanAnnouncedMicroBatch(documents, worker0, kShape, options, "micro-batch 3",
                                      &refusal);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(refusal, "");
  EXPECT_EQ(plan->source, MicroBatchPlan::Source::kScheduler);
  EXPECT_EQ(plan->scheduler_step, 12);
  EXPECT_EQ(plan->speed_weights_version, 4u);
  ASSERT_EQ(plan->plan.tasks.size(), 4u);
  // Laid out per server: server 0 holds [0,70) of worker 0's document 0 and
  // worker 1's document; server 1 the rest.
  EXPECT_EQ(plan->batches[0].q_rows, 70 + 60);
  EXPECT_EQ(plan->batches[1].q_rows, 30 + 20);
  EXPECT_EQ(plan->batches[1].kv_rows, 100 + 20);
  EXPECT_EQ(plan->shares[0][1].q_rows, 60);
}

TEST(PlanAnnouncedMicroBatchTest, PlansLocallyWhenTheShippedPlanDoesNotFit) {
  const std::vector<std::vector<int64_t>> documents = {{100, 20}, {60}};
  PlanOptions options;
  options.servers = 2;
  struct Case {
    ShippedPlan plan;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {WholeDocuments(5, {{100, 20}, {61}}, 0), "task out of range: worker 1 document 0"},
      {WholeDocuments(5, {{100, 20}}, 0), "worker 1 document 0: tasks cover [0, 0) of 60"},
      {WholeDocuments(5, {{100, 20}, {60}}, 2), "server 2"},
      {ShippedPlan{5, 0, {{0, 0, 0, 50, 0}, {0, 0, 40, 100, 1}, {0, 1, 0, 20, 0},
                          {1, 0, 0, 60, 0}}},
       "worker 0 document 0: tasks leave a gap or overlap at position 50"},
  };
  DocumentsMessage worker0;
  worker0.weights = VersionedSpeedWeights{2, {3.0, 1.0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.reason);
    worker0.plan = c.plan;
    std::string refusal;
    auto plan = PlanAnnouncedMicroBatch(documents, worker0, kShape, options, "micro-batch 3",
                                        &refusal);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(plan->source, MicroBatchPlan::Source::kParticipants);
    EXPECT_EQ(plan->speed_weights_version, 2u);  // worker 0's weights, not the plan's
    EXPECT_THAT(refusal, HasSubstr("the scheduler's plan of step 5 does not fit micro-batch 3"));
    EXPECT_THAT(refusal, HasSubstr(c.reason));
    // The local plan is the planner's with worker 0's weights.
    PlanOptions weighted = options;
    weighted.server_speeds = {3.0, 1.0};
    auto local = PlanMicroBatch(documents, kShape, weighted);
    ASSERT_TRUE(local.ok());
    EXPECT_EQ(plan->plan.tasks, local->plan.tasks);
  }
}

TEST(PlanAnnouncedMicroBatchTest, RefusesImpossibleLengthsNamingTheWorker) {
  DocumentsMessage worker0;
  PlanOptions options;
  auto plan = PlanAnnouncedMicroBatch({{4}, {0}}, worker0, kShape, options, "micro-batch 1",
                                      nullptr);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(plan.status().message(),
              HasSubstr("document length 0 from worker 1 in micro-batch 1"));
}

}  // namespace
}  // namespace corescape::attention
