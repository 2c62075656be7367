#include "scheduler/attention_weight_pushes.h"

#include "gtest/gtest.h"

namespace corescape::scheduler {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

TEST(SpeedWeightPushesTest, PushesMaterialChangesRateLimitedAndForced) {
  SpeedWeightPushes pushes({/*min_change=*/0.02, /*min_interval=*/absl::Seconds(1)});
  // The workers start with equal weights: nothing to say.
  EXPECT_FALSE(pushes.Next("j", 1, 0, {1.0, 1.0}, kStart, false));
  EXPECT_FALSE(pushes.Next("j", 1, 0, {1.015, 0.985}, kStart, false)) << "1.5% is noise";
  auto first = pushes.Next("j", 1, 0, {1.1, 0.9}, kStart, false);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->job_id(), "j");
  EXPECT_EQ(first->version(), 1u);
  EXPECT_EQ(first->weights_size(), 2);
  EXPECT_DOUBLE_EQ(first->weights(1), 0.9);
  // Compared with what was pushed, not with equal weights.
  EXPECT_FALSE(pushes.Next("j", 1, 0, {1.1, 0.9}, kStart + absl::Seconds(5), false));
  EXPECT_FALSE(pushes.Next("j", 1, 0, {1.3, 0.7}, kStart + absl::Milliseconds(999), false))
      << "within the interval";
  auto forced = pushes.Next("j", 1, 0, {1.1, 0.9}, kStart + absl::Milliseconds(999), true);
  ASSERT_TRUE(forced);
  EXPECT_EQ(forced->version(), 2u);
  auto later = pushes.Next("j", 1, 0, {1.3, 0.7}, kStart + absl::Seconds(2), false);
  ASSERT_TRUE(later);
  EXPECT_EQ(later->version(), 3u);
}

TEST(SpeedWeightPushesTest, NewGenerationOrEpochStartsFromEqualWeights) {
  SpeedWeightPushes pushes({});
  ASSERT_TRUE(pushes.Next("j", 1, 0, {1.5, 0.5}, kStart, false));
  // Same weights, but new executors (epoch 1) plan with equal ones: push,
  // without waiting out the interval.
  auto epoch = pushes.Next("j", 1, 1, {1.5, 0.5}, kStart, false);
  ASSERT_TRUE(epoch);
  EXPECT_EQ(epoch->attention_epoch(), 1u);
  EXPECT_EQ(epoch->version(), 2u);
  auto generation = pushes.Next("j", 2, 0, {1.5, 0.5}, kStart, false);
  ASSERT_TRUE(generation);
  EXPECT_EQ(generation->generation(), 2u);
  EXPECT_EQ(generation->version(), 3u);
  // Other jobs count on their own; a forgotten job starts over.
  EXPECT_EQ(pushes.Next("k", 1, 0, {1.5, 0.5}, kStart, false)->version(), 1u);
  pushes.Forget("j");
  EXPECT_FALSE(pushes.Next("j", 2, 0, {1.0, 1.0}, kStart, false));
  EXPECT_FALSE(pushes.Next("j", 2, 0, {}, kStart, true)) << "no servers, nothing to say";
}

}  // namespace
}  // namespace corescape::scheduler
