#include "runtime/planner/attention_planner.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/planner/causal_pairs.h"
#include "runtime/planner/distca_greedy.h"
#include "runtime/planner/plan_summary.h"
#include "runtime/planner/planner_test_util.h"

namespace corescape::planner {
namespace {

// Dedicated servers: nobody's data is local.
PlanInput Dedicated(std::vector<std::vector<int64_t>> batches, std::vector<double> speeds) {
  PlanInput input = InPlaceInput(std::move(batches));
  input.servers.clear();
  for (double s : speeds) input.servers.push_back(AttentionServer{.speed = s});
  return input;
}

TEST(AttentionPlannerTest, InvariantsAndToleranceOnRandomBatches) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int workers = 1 + trial % 13;
    PlanInput input = InPlaceInput(RandomBatches(rng, workers, 8192, 8192));
    if (trial % 3 == 1) input.cost.task_overhead_flops = 500 * FlopsPerPair(input);
    if (trial % 4 == 2) {  // heterogeneous speeds
      for (size_t s = 0; s < input.servers.size(); ++s) input.servers[s].speed = 0.5 + 0.25 * (s % 3);
    }
    if (trial % 5 == 3) {  // two extra dedicated servers
      input.servers.push_back(AttentionServer{.speed = 1.0});
      input.servers.push_back(AttentionServer{.speed = 2.0});
    }
    for (double tolerance : {0.0, 0.01, 0.05}) {
      absl::StatusOr<Plan> plan = PlanAttention(input, {.tolerance = tolerance});
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(CheckPlan(input, *plan), "") << "trial " << trial;
      // Splitting to the token is always possible here, so the tolerance is
      // met up to one token's pairs per server.
      EXPECT_LE(plan->imbalance, 1 + tolerance + 1e-3)
          << "trial " << trial << " tolerance " << tolerance;
    }
  }
}

TEST(AttentionPlannerTest, InvariantsAtScaleWithLongDocuments) {
  std::mt19937_64 rng(17);
  PlanInput input = InPlaceInput(RandomBatches(rng, 64, 65536, 131072));
  for (double tolerance : {0.0, 0.02}) {
    absl::StatusOr<Plan> plan = PlanAttention(input, {.tolerance = tolerance});
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(CheckPlan(input, *plan), "");
    EXPECT_LE(plan->imbalance, 1 + tolerance + 1e-4);
  }
}

TEST(AttentionPlannerTest, Deterministic) {
  std::mt19937_64 rng(3);
  PlanInput input = InPlaceInput(RandomBatches(rng, 16, 32768, 32768));
  absl::StatusOr<Plan> a = PlanAttention(input, {});
  absl::StatusOr<Plan> b = PlanAttention(input, {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tasks, b->tasks);
  EXPECT_EQ(a->bytes_moved, b->bytes_moved);
}

TEST(AttentionPlannerTest, SpeedWeightsAreRespected) {
  // Four dedicated servers, one at half speed: it gets about half the work
  // of the others and all four finish together.
  std::mt19937_64 rng(5);
  PlanInput input = Dedicated(RandomBatches(rng, 4, 16384, 4096), {1.0, 1.0, 0.5, 1.0});
  absl::StatusOr<Plan> plan = PlanAttention(input, {.tolerance = 0.01});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CheckPlan(input, *plan), "");
  const double full = plan->servers[0].flops;
  EXPECT_NEAR(plan->servers[2].flops / full, 0.5, 0.03);
  EXPECT_LE(plan->imbalance, 1.01 + 1e-3);
  for (const ServerLoad& s : plan->servers) EXPECT_GE(s.time, 0.97 * plan->mean_time);
}

TEST(AttentionPlannerTest, BalancedInputMovesNothing) {
  PlanInput input = InPlaceInput({{1000, 24}, {1000, 24}, {1000, 24}});
  absl::StatusOr<Plan> plan = PlanAttention(input, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->bytes_moved, 0);
  EXPECT_EQ(plan->stats.tasks, 6);
  EXPECT_DOUBLE_EQ(plan->imbalance, 1.0);
}

TEST(AttentionPlannerTest, WorkedExampleBeatsDistcaOnBalanceAndBytes) {
  const PlanInput input = DistcaWorkedExample();
  absl::StatusOr<Plan> distca = PlanDistcaGreedy(input, {.tolerance = 0.05, .token_budget = 16384});
  absl::StatusOr<Plan> ours = PlanAttention(input, {.tolerance = 0.02});
  ASSERT_TRUE(distca.ok() && ours.ok());
  EXPECT_EQ(CheckPlan(input, *ours), "");
  EXPECT_LE(ours->imbalance, 1.02);
  EXPECT_LT(ours->bytes_moved, distca->bytes_moved);
}

TEST(AttentionPlannerTest, LongDocumentSpreadsOverServers) {
  // One 200k-token document, 8 dedicated servers: it must be cut into about
  // 8 ranges; every server within 1%.
  PlanInput input = Dedicated({{200'000}}, std::vector<double>(8, 1.0));
  absl::StatusOr<Plan> plan = PlanAttention(input, {.tolerance = 0.01});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CheckPlan(input, *plan), "");
  EXPECT_LE(plan->imbalance, 1.01 + 1e-6);
  EXPECT_GE(plan->stats.tasks, 8);
  EXPECT_LE(plan->stats.tasks, 10);
}

TEST(AttentionPlannerTest, TrivialInputs) {
  // No documents at all.
  PlanInput empty = InPlaceInput({{}, {}});
  absl::StatusOr<Plan> plan = PlanAttention(empty, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->tasks.empty());
  EXPECT_DOUBLE_EQ(plan->imbalance, 1.0);
  // Documents of one token cannot be split; they are placed whole.
  PlanInput ones = InPlaceInput({{1, 1, 1, 1, 1}, {}});
  plan = PlanAttention(ones, {.tolerance = 0.0});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CheckPlan(ones, *plan), "");
  EXPECT_LE(plan->servers[0].pairs, 3);
  // Workers without any server of their own, one server.
  PlanInput one_server = Dedicated({{5, 7}, {9}}, {2.0});
  plan = PlanAttention(one_server, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CheckPlan(one_server, *plan), "");
  EXPECT_EQ(plan->stats.tasks, 3);
}

TEST(AttentionPlannerTest, InvalidInputsAreRejectedClearly) {
  PlanInput no_servers = InPlaceInput({{10}});
  no_servers.servers.clear();
  absl::StatusOr<Plan> plan = PlanAttention(no_servers, {});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("servers"), std::string::npos);

  PlanInput zero_length = InPlaceInput({{10, 0}});
  plan = PlanAttention(zero_length, {});
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("worker_documents[0][1]"), std::string::npos);

  PlanInput bad_speed = InPlaceInput({{10}});
  bad_speed.servers[0].speed = 0;
  EXPECT_EQ(PlanAttention(bad_speed, {}).status().code(), absl::StatusCode::kInvalidArgument);

  PlanInput shared = InPlaceInput({{10}, {10}});
  shared.servers[1].colocated_worker = 0;
  EXPECT_EQ(PlanAttention(shared, {}).status().code(), absl::StatusCode::kInvalidArgument);

  PlanInput bad_shape = InPlaceInput({{10}});
  bad_shape.model.hidden = 100;
  EXPECT_EQ(PlanAttention(bad_shape, {}).status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(PlanAttention(InPlaceInput({{10}}), {.tolerance = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AttentionPlannerTest, OverheadCountsTasks) {
  PlanInput input = InPlaceInput({{4096}, {}});
  input.cost.task_overhead_flops = 1000 * FlopsPerPair(input);
  absl::StatusOr<Plan> plan = PlanAttention(input, {.tolerance = 0.0});
  ASSERT_TRUE(plan.ok()) << plan.status();
  double flops = 0;
  for (const ServerLoad& s : plan->servers) flops += s.flops;
  EXPECT_DOUBLE_EQ(flops, (DocumentPairs(4096) + 1000.0 * plan->stats.tasks) * FlopsPerPair(input));
  EXPECT_LE(plan->imbalance, 1.0 + 2000.0 / DocumentPairs(4096) * 2);
}

}  // namespace
}  // namespace corescape::planner
