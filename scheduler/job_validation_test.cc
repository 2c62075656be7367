#include "scheduler/job_validation.h"

#include "gtest/gtest.h"

namespace corescape::scheduler {
namespace {

// keep_qkv_for_backward has explicit presence: unset means the default
// (servers keep Q/K/V), an explicit false is the user's choice.
TEST(ApplyJobDefaultsTest, KeepQkvForBackwardDefaultsToTrueUnlessSet) {
  v1::JobSpec unset;
  ApplyJobDefaults(unset);
  EXPECT_TRUE(unset.attention().has_keep_qkv_for_backward());
  EXPECT_TRUE(unset.attention().keep_qkv_for_backward());

  v1::JobSpec off;
  off.mutable_attention()->set_keep_qkv_for_backward(false);
  ApplyJobDefaults(off);
  EXPECT_FALSE(off.attention().keep_qkv_for_backward());

  // Presence survives the wire: a scheduler restart or a resubmission does
  // not turn an explicit false into the default.
  v1::JobSpec parsed;
  ASSERT_TRUE(parsed.ParseFromString(off.SerializeAsString()));
  ApplyJobDefaults(parsed);
  EXPECT_FALSE(parsed.attention().keep_qkv_for_backward());
}

TEST(ApplyJobDefaultsTest, AttentionDefaults) {
  v1::JobSpec spec;
  ApplyJobDefaults(spec);
  EXPECT_EQ(spec.attention().mode(), v1::COLOCATED);
  EXPECT_DOUBLE_EQ(spec.attention().tolerance(), 0.05);
}

}  // namespace
}  // namespace corescape::scheduler
