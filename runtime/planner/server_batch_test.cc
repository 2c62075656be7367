#include "runtime/planner/server_batch.h"

#include "gtest/gtest.h"
#include "runtime/planner/plan_summary.h"
#include "runtime/planner/planner_test_util.h"

namespace corescape::planner {
namespace {

TEST(ServerBatchTest, LaysOutQRowsAndSharedKvBlocks) {
  PlanInput input = InPlaceInput({{100, 30}, {40}});
  // Server 1 holds the mirrored head/tail of worker 0's first document and
  // all of worker 1's document; the rest stays on server 0.
  absl::StatusOr<Plan> plan = SummarizePlan(
      input, {{0, 0, 0, 10, 1}, {0, 0, 90, 100, 1}, {0, 0, 10, 90, 0}, {0, 1, 0, 30, 0},
              {1, 0, 0, 40, 1}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<ServerBatch> batch = LayOutServerBatch(*plan, 1);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->tasks.size(), 3u);
  EXPECT_EQ(batch->q_rows, 10 + 10 + 40);
  EXPECT_EQ(batch->kv_rows, 100 + 40);
  ASSERT_EQ(batch->documents.size(), 2u);
  EXPECT_EQ(batch->documents[0].kv_rows, 100);
  EXPECT_EQ(batch->documents[1].kv_row, 100);
  // Head and tail share K/V block 0; their Q rows follow each other.
  EXPECT_EQ(batch->tasks[0].q_row, 0);
  EXPECT_EQ(batch->tasks[0].kv_row, 0);
  EXPECT_EQ(batch->tasks[1].q_begin, 90);
  EXPECT_EQ(batch->tasks[1].q_row, 10);
  EXPECT_EQ(batch->tasks[1].kv_row, 0);
  EXPECT_EQ(batch->tasks[2].q_row, 20);
  EXPECT_EQ(batch->tasks[2].kv_row, 100);
  for (size_t i = 0; i < batch->tasks.size(); ++i) {
    const PlannedTask& source = plan->tasks[batch->plan_task[i]];
    EXPECT_EQ(source.server, 1);
    EXPECT_EQ(source.q_begin, batch->tasks[i].q_begin);
  }
  EXPECT_FALSE(LayOutServerBatch(*plan, 2).ok());
  absl::StatusOr<ServerBatch> empty = LayOutServerBatch(*plan, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->tasks.size(), 2u);
}

}  // namespace
}  // namespace corescape::planner
