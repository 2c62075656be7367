#include "scheduler/data_plane_secret.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace corescape::scheduler {
namespace {

TEST(DataPlaneSecretTest, EachGenerationHasItsOwnSecret) {
  absl::StatusOr<std::string> job = NewJobSecret();
  ASSERT_TRUE(job.ok()) << job.status();
  std::set<std::string> seen;
  for (uint64_t generation = 1; generation <= 100; ++generation) {
    const std::string secret = GenerationSecret(*job, generation);
    EXPECT_EQ(secret.size(), 64u);
    EXPECT_EQ(secret, GenerationSecret(*job, generation));  // every member derives the same
    EXPECT_EQ(secret.find(*job), std::string::npos);
    seen.insert(secret);
  }
  EXPECT_EQ(seen.size(), 100u);
  absl::StatusOr<std::string> other = NewJobSecret();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *job);
  EXPECT_NE(GenerationSecret(*other, 1), GenerationSecret(*job, 1));
}

}  // namespace
}  // namespace corescape::scheduler
