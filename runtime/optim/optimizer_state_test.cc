// The optimizer state container: round trip, checksum, bounded counts.
#include "runtime/optim/optimizer_state.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace corescape::optim {
namespace {

TEST(OptimizerStateTest, RoundTripsAndRefusesDamage) {
  StateWriter w;
  w.AddInt64("step", 12);
  w.AddFloats("m", std::vector<float>{1.5f, -2.0f});
  const std::string blob = w.Finish();
  auto r = StateReader::Parse(blob);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r->Count("step"), 12);
  EXPECT_EQ(r->FloatsOfSize("m", 2)->at(1), -2.0f);
  std::string damaged = blob;
  damaged[10] ^= 4;
  EXPECT_EQ(StateReader::Parse(damaged).status().code(), absl::StatusCode::kDataLoss);
  // A blob resealed after an edit passes the checksum, and only that.
  const std::string body = damaged.substr(0, damaged.size() - 8);
  const uint64_t checksum = StateChecksum(body);
  EXPECT_NE(StateChecksum(blob.substr(0, blob.size() - 8)), checksum);
}

// Counts (steps) are refused outside [0, kMaxStateCount], so nothing that
// adds to them or indexes by them can overflow.
TEST(OptimizerStateTest, CountsAreBounded) {
  for (int64_t bad : {int64_t{-1}, kMaxStateCount + 1, std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max()}) {
    StateWriter w;
    w.AddInt64("step", bad);
    auto r = StateReader::Parse(w.Finish());
    ASSERT_TRUE(r.ok());
    const auto count = r->Count("step");
    EXPECT_EQ(count.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_NE(count.status().message().find("'step'"), std::string::npos) << count.status();
    EXPECT_EQ(*r->Int64("step"), bad);  // the plain reader still gives it
  }
}

}  // namespace
}  // namespace corescape::optim
