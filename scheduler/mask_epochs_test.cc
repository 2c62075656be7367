#include "scheduler/mask_epochs.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "runtime/job/job_spec.h"
#include "runtime/model/parameter_layout.h"

namespace corescape::scheduler {
namespace {

v1::Job ScapeJob() {
  v1::Job job;
  job.set_job_id("job-7");
  job.set_generation(3);
  job.mutable_spec()->mutable_model()->set_preset("tiny");
  job.mutable_spec()->mutable_optimizer()->set_name("scape");
  job.mutable_spec()->mutable_optimizer()->mutable_scape()->set_density(0.01);
  job.mutable_spec()->mutable_checkpoint()->set_interval_steps(25);
  job.mutable_progress()->set_checkpoint_step(-1);
  return job;
}

TEST(MaskEpochsTest, FirstEpochPartitionsTheModelsBufferEvenly) {
  auto epoch = NextMaskEpoch(ScapeJob(), 3);
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  const int64_t n =
      model::ParameterLayout(*job::ModelConfigFromSpec(ScapeJob().spec().model())).total_size();
  EXPECT_EQ(epoch->epoch(), 1);
  EXPECT_EQ(epoch->generation(), 3u);
  EXPECT_EQ(epoch->first_step(), 0);
  EXPECT_EQ(epoch->parameter_count(), n);
  EXPECT_EQ(epoch->world_size(), 3);
  ASSERT_EQ(epoch->partition_bounds_size(), 4);
  EXPECT_EQ(epoch->partition_bounds(0), 0);
  EXPECT_EQ(epoch->partition_bounds(3), n);
  for (int r = 0; r < 3; ++r) {
    const int64_t size = epoch->partition_bounds(r + 1) - epoch->partition_bounds(r);
    EXPECT_LE(std::abs(size - n / 3), 1) << "rank " << r;
  }
  EXPECT_EQ(epoch->residual_sync_period(), 25);
  EXPECT_EQ(epoch->forced_dense_steps_size(), 0);
}

TEST(MaskEpochsTest, PerTensorMasksGetWholeTensorsPerRank) {
  // The reference rule's owner ranks: the map the optimizer checks
  // (CheckTensorAligned), dealt by element count.
  v1::Job job = ScapeJob();
  job.mutable_spec()->mutable_optimizer()->mutable_scape()->set_rule("reference");
  auto epoch = NextMaskEpoch(job, 3);
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  const model::ParameterLayout layout(*job::ModelConfigFromSpec(job.spec().model()));
  const std::vector<int64_t> tensors = layout.TensorBounds();
  ASSERT_EQ(epoch->partition_bounds_size(), 4);
  for (int64_t bound : epoch->partition_bounds()) {
    EXPECT_TRUE(std::binary_search(tensors.begin(), tensors.end(), bound)) << bound;
  }
  const int64_t n = layout.total_size();
  for (int r = 0; r < 3; ++r) {
    const int64_t size = epoch->partition_bounds(r + 1) - epoch->partition_bounds(r);
    EXPECT_LT(std::abs(size - n / 3), n / 6) << "rank " << r;
  }
}

TEST(MaskEpochsTest, ResumingUnderTheSameMembershipContinuesWithoutADenseStep) {
  v1::Job job = ScapeJob();
  job.set_mask_epoch(4);
  job.set_mask_epoch_world_size(3);
  job.mutable_progress()->set_checkpoint_step(50);
  auto epoch = NextMaskEpoch(job, 3);
  ASSERT_TRUE(epoch.ok());
  EXPECT_EQ(epoch->epoch(), 5);
  EXPECT_EQ(epoch->first_step(), 50);
  EXPECT_EQ(epoch->forced_dense_steps_size(), 0);
}

TEST(MaskEpochsTest, ANewMembershipForcesADenseFirstStep) {
  v1::Job job = ScapeJob();
  job.set_mask_epoch(4);
  job.set_mask_epoch_world_size(3);
  job.mutable_progress()->set_checkpoint_step(50);
  auto epoch = NextMaskEpoch(job, 2);
  ASSERT_TRUE(epoch.ok());
  EXPECT_EQ(epoch->partition_bounds_size(), 3);
  ASSERT_EQ(epoch->forced_dense_steps_size(), 1);
  EXPECT_EQ(epoch->forced_dense_steps(0), 50);
}

TEST(MaskEpochsTest, RefusesJobsThatAreNotScape) {
  v1::Job job = ScapeJob();
  job.mutable_spec()->mutable_optimizer()->set_name("adamw");
  EXPECT_EQ(NextMaskEpoch(job, 2).status().code(), absl::StatusCode::kFailedPrecondition);
  job = ScapeJob();
  job.mutable_spec()->mutable_model()->set_preset("no-such-model");
  EXPECT_FALSE(NextMaskEpoch(job, 2).ok());
}

}  // namespace
}  // namespace corescape::scheduler
