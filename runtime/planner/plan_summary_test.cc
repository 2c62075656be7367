#include "runtime/planner/plan_summary.h"

#include "gtest/gtest.h"
#include "runtime/planner/planner_test_util.h"

namespace corescape::planner {
namespace {

TEST(PlanSummaryTest, CountsQOfRemoteTasksAndEachKvPrefixOncePerServer) {
  // Worker 0 has a 100-token document; server 0 is its own GPU, server 1 is
  // not. Server 1 gets head [0,10) and tail [90,100) (a mirrored pair) plus
  // [10, 20); server 0 keeps [20, 90).
  PlanInput input = InPlaceInput({{100}});
  input.servers.push_back(AttentionServer{.speed = 2.0});
  absl::StatusOr<Plan> plan = SummarizePlan(
      input, {{0, 0, 0, 10, 1}, {0, 0, 90, 100, 1}, {0, 0, 10, 20, 1}, {0, 0, 20, 90, 0}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->q_bytes, 30 * 8192);
  EXPECT_EQ(plan->kv_bytes, 100 * 4096);  // prefix [0,100) once
  EXPECT_EQ(plan->servers[1].bytes_received, plan->bytes_moved);
  EXPECT_EQ(plan->servers[0].bytes_received, 0);
  EXPECT_EQ(plan->stats.split_documents, 1);
  EXPECT_EQ(plan->stats.remote_tasks, 3);
  // Time is FLOPs over speed; mean time is total FLOPs over total speed.
  EXPECT_DOUBLE_EQ(plan->servers[1].time, plan->servers[1].flops / 2.0);
  EXPECT_DOUBLE_EQ(plan->mean_time, (plan->servers[0].flops + plan->servers[1].flops) / 3.0);
  // Sorted by (server, worker, document, q_begin).
  EXPECT_EQ(plan->tasks.front().server, 0);
  EXPECT_EQ(plan->tasks[1].q_begin, 0);
  EXPECT_EQ(plan->tasks[2].q_begin, 10);
}

TEST(PlanSummaryTest, RejectsGapsOverlapsAndMissingDocuments) {
  PlanInput input = InPlaceInput({{100, 5}});
  EXPECT_EQ(SummarizePlan(input, {{0, 0, 0, 50, 0}, {0, 0, 60, 100, 0}, {0, 1, 0, 5, 0}})
                .status()
                .code(),
            absl::StatusCode::kInternal);
  EXPECT_FALSE(SummarizePlan(input, {{0, 0, 0, 60, 0}, {0, 0, 50, 100, 0}, {0, 1, 0, 5, 0}}).ok());
  EXPECT_FALSE(SummarizePlan(input, {{0, 0, 0, 100, 0}}).ok());
  EXPECT_FALSE(SummarizePlan(input, {{0, 0, 0, 100, 0}, {0, 1, 0, 6, 0}}).ok());
  EXPECT_TRUE(SummarizePlan(input, {{0, 0, 0, 100, 0}, {0, 1, 0, 5, 0}}).ok());
}

}  // namespace
}  // namespace corescape::planner
