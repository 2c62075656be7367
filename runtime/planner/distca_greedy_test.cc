#include "runtime/planner/distca_greedy.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/planner/causal_pairs.h"
#include "runtime/planner/planner_test_util.h"

namespace corescape::planner {
namespace {

std::vector<int64_t> Pairs(const Plan& plan) {
  std::vector<int64_t> pairs;
  for (const ServerLoad& s : plan.servers) pairs.push_back(s.pairs);
  return pairs;
}

TEST(DistcaGreedyTest, WorkedExampleAtTolerancePointOneMatchesPublishedLoads) {
  const PlanInput input = DistcaWorkedExample();
  absl::StatusOr<Plan> plan = PlanDistcaGreedy(input, {.tolerance = 0.1, .token_budget = 16384});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CheckPlan(input, *plan), "");
  int64_t total = 0;
  for (int64_t p : Pairs(*plan)) total += p;
  EXPECT_EQ(total, 4 * 62'922'752);  // published mean load
  EXPECT_EQ(Pairs(*plan),
            (std::vector<int64_t>{62'934'785, 67'117'056, 58'729'984, 62'909'183}));
  EXPECT_NEAR(plan->imbalance, 1.067, 5e-4);
  // Two moves out of the 16384-token document: the middle 5630 tokens to
  // rank 3 (K/V prefix 11007), then the next 1536 pairs inside it to rank 2
  // (3072 tokens, prefix 12543). Measured with DistCA's own code: 168 MB.
  EXPECT_EQ(plan->stats.planner_steps, 2);
  EXPECT_EQ(plan->q_bytes, (5630 + 3072) * 8192);
  EXPECT_EQ(plan->kv_bytes, (11007 + 12543) * 4096);
  EXPECT_EQ(plan->bytes_moved, 167'747'584);
}

TEST(DistcaGreedyTest, WorkedExampleAtToleranceFivePercent) {
  const PlanInput input = DistcaWorkedExample();
  absl::StatusOr<Plan> plan = PlanDistcaGreedy(input, {.tolerance = 0.05, .token_budget = 16384});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CheckPlan(input, *plan), "");
  // A third move, 511 mirrored pairs of an 8192-token document to rank 2.
  EXPECT_EQ(Pairs(*plan),
            (std::vector<int64_t>{62'934'785, 62'930'433, 62'916'607, 62'909'183}));
  EXPECT_NEAR(plan->imbalance, 1.0002, 5e-5);
  EXPECT_EQ(plan->bytes_moved, 167'747'584 + 1022 * 8192 + 4607 * 4096);  // ~195 MB
}

TEST(DistcaGreedyTest, WithoutBudgetEachWorkerIsItsRank) {
  const PlanInput input = DistcaWorkedExample();
  absl::StatusOr<Plan> with_budget =
      PlanDistcaGreedy(input, {.tolerance = 0.05, .token_budget = 16384});
  absl::StatusOr<Plan> without = PlanDistcaGreedy(input, {.tolerance = 0.05});
  ASSERT_TRUE(with_budget.ok() && without.ok());
  EXPECT_EQ(with_budget->tasks, without->tasks);
}

TEST(DistcaGreedyTest, ZigZagLayoutCutsFrontAndBack) {
  // 3 ranks of 8 tokens; one 20-token document: rank 0 takes [0,4)+[16,20),
  // rank 1 [4,8)+[12,16), rank 2 the middle [8,12). Tolerance high enough
  // that nothing moves.
  PlanInput input = InPlaceInput({{20}, {}, {}});
  absl::StatusOr<Plan> plan = PlanDistcaGreedy(input, {.tolerance = 10.0, .token_budget = 8});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CheckPlan(input, *plan), "");
  const std::vector<PlannedTask> expected = {
      {0, 0, 0, 4, 0}, {0, 0, 16, 20, 0}, {0, 0, 4, 8, 1},
      {0, 0, 12, 16, 1}, {0, 0, 8, 12, 2}};
  EXPECT_EQ(plan->tasks, expected);
  // Every cut is mirrored: equal token counts on the first two ranks cost
  // the same apart from the middle.
  EXPECT_EQ(plan->servers[0].pairs, 4 * 21);
  EXPECT_EQ(plan->servers[1].pairs, 4 * 21);
}

TEST(DistcaGreedyTest, InvariantsOnRandomBatches) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int workers = 1 + trial % 9;
    PlanInput input = InPlaceInput(RandomBatches(rng, workers, 4096, 3000));
    for (int64_t budget : {int64_t{0}, int64_t{4096}, int64_t{3000}}) {
      absl::StatusOr<Plan> plan =
          PlanDistcaGreedy(input, {.tolerance = 0.05, .token_budget = budget});
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(CheckPlan(input, *plan), "") << "trial " << trial << " budget " << budget;
    }
  }
}

TEST(DistcaGreedyTest, RejectsMismatchedRanksWithoutBudget) {
  PlanInput input = InPlaceInput({{10}, {20}});
  input.servers.push_back(AttentionServer{});
  EXPECT_FALSE(PlanDistcaGreedy(input, {}).ok());
}

}  // namespace
}  // namespace corescape::planner
