#include "worker/attention_reports.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace corescape::worker {
namespace {

using ::testing::HasSubstr;

v1::JobAssignment Assignment(int64_t steps) {
  v1::JobAssignment assignment;
  assignment.set_job_id("job-3");
  assignment.set_generation(2);
  assignment.set_rank(1);
  assignment.mutable_spec()->set_steps(steps);
  return assignment;
}

TEST(BuildAttentionDemandTest, EveryMicroBatchOfTheStep) {
  auto demand = BuildAttentionDemand(Assignment(10), 4, 7, {{5, 3, 1}, {9}});
  ASSERT_TRUE(demand.ok()) << demand.status();
  EXPECT_EQ(demand->job_id(), "job-3");
  EXPECT_EQ(demand->generation(), 2u);
  EXPECT_EQ(demand->rank(), 1);
  EXPECT_EQ(demand->step(), 7);
  EXPECT_EQ(demand->attention_epoch(), 4u);
  ASSERT_EQ(demand->micro_batches_size(), 2);
  EXPECT_EQ(std::vector<int64_t>(demand->micro_batches(0).document_lengths().begin(),
                                 demand->micro_batches(0).document_lengths().end()),
            (std::vector<int64_t>{5, 3, 1}));
  EXPECT_EQ(demand->micro_batches(1).document_lengths(0), 9);
  EXPECT_THAT(BuildAttentionDemand(Assignment(10), 0, 7, {{5}, {2, 0}}).status().message(),
              HasSubstr("micro-batch 1 of step 7: document 1 has length 0"));
  EXPECT_EQ(BuildAttentionDemand(Assignment(10), 0, 7, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Records what the lookahead sends and which steps it peeked at.
struct Recorder {
  std::vector<v1::AttentionDemand> sent;
  std::vector<int64_t> peeked;  // steps_ahead of each peek
  int64_t completed = 0;
  AttentionDemandLookahead::Peek Peek() {
    return [this](int64_t ahead) -> absl::StatusOr<std::vector<std::vector<int64_t>>> {
      peeked.push_back(ahead);
      const int64_t step = completed + ahead;
      if (step == 5) return absl::FailedPreconditionError("loader ran dry");
      return std::vector<std::vector<int64_t>>{{step, 1}};
    };
  }
  std::vector<int64_t> Steps() const {
    std::vector<int64_t> steps;
    for (const auto& d : sent) steps.push_back(d.step());
    return steps;
  }
};

TEST(AttentionDemandLookaheadTest, SendsEachStepOnceOneStepAheadPerEpoch) {
  Recorder r;
  AttentionDemandLookahead lookahead(Assignment(6), [&r](v1::NodeMessage m) {
    r.sent.push_back(m.attention_demand());
  });
  auto before = [&](int64_t completed, uint64_t epoch) {
    r.completed = completed;
    lookahead.BeforeStep(completed, epoch, r.Peek());
  };
  before(0, 0);  // steps 1 and 2 before step 1
  EXPECT_EQ(r.Steps(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.peeked, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.sent[1].micro_batches(0).document_lengths(0), 2);  // step 2's own documents
  before(1, 0);  // step 3 only
  before(2, 0);  // step 4
  EXPECT_EQ(r.Steps(), (std::vector<int64_t>{1, 2, 3, 4}));
  // Step 3 is redone in attention epoch 1: steps 3 and 4 again.
  before(2, 1);
  EXPECT_EQ(r.Steps(), (std::vector<int64_t>{1, 2, 3, 4, 3, 4}));
  EXPECT_EQ(r.sent.back().attention_epoch(), 1u);
  // Step 5 cannot be looked at: skipped (the participants plan it), step 6
  // still goes, and nothing past the job's last step.
  before(3, 1);
  before(4, 1);
  before(5, 1);
  EXPECT_EQ(r.Steps(), (std::vector<int64_t>{1, 2, 3, 4, 3, 4, 6}));
  EXPECT_EQ(r.peeked.back(), 2);  // step 6 from step 4; nothing from step 5
}

v1::AttentionStepPlan StepPlan() {
  v1::AttentionStepPlan plan;
  plan.set_job_id("job-3");
  plan.set_step(8);
  plan.set_speed_weights_version(3);
  for (int m = 0; m < 2; ++m) {
    auto* micro_batch = plan.add_micro_batches();
    for (int w = 0; w < 2; ++w) {
      v1::AttentionTask* task = micro_batch->add_tasks();
      task->set_worker_rank(w);
      task->set_document(0);
      task->set_q_begin(0);
      task->set_q_end(10 + m);
      task->set_server(1);
    }
  }
  return plan;
}

TEST(ShippedPlansFromStepPlanTest, OnePlanPerMicroBatch) {
  auto plans = ShippedPlansFromStepPlan(StepPlan(), 2, 2);
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 2u);
  EXPECT_EQ((*plans)[1].step, 8);
  EXPECT_EQ((*plans)[1].speed_weights_version, 3u);
  EXPECT_EQ((*plans)[1].tasks,
            (std::vector<planner::PlannedTask>{{0, 0, 0, 11, 1}, {1, 0, 0, 11, 1}}));
}

TEST(ShippedPlansFromStepPlanTest, RefusesTasksOutOfRangeNamingTheField) {
  EXPECT_THAT(ShippedPlansFromStepPlan(StepPlan(), 2, 1).status().message(),
              HasSubstr("attention_step_plan.micro_batches[0].tasks[0].server: 1, the attention "
                        "epoch has 1 servers"));
  EXPECT_THAT(ShippedPlansFromStepPlan(StepPlan(), 1, 2).status().message(),
              HasSubstr("micro_batches[0].tasks[1].worker_rank: 1, the job has 1 workers"));
  v1::AttentionStepPlan bad = StepPlan();
  bad.mutable_micro_batches(1)->mutable_tasks(0)->set_q_begin(11);
  EXPECT_THAT(ShippedPlansFromStepPlan(bad, 2, 2).status().message(),
              HasSubstr("micro_batches[1].tasks[0]: document 0 queries [11, 11)"));
}

}  // namespace
}  // namespace corescape::worker
