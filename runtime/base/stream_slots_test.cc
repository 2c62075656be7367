#include "runtime/base/stream_slots.h"

#include <optional>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace corescape {
namespace {

TEST(StreamSlotsTest, RefusesPastTheCapAndFreesOnRelease) {
  StreamSlots slots("Session streams", "--max_sessions", 2);
  std::vector<StreamSlots::Slot> held;
  for (int i = 0; i < 2; ++i) {
    auto slot = slots.Acquire();
    ASSERT_TRUE(slot.ok()) << slot.status();
    held.push_back(*std::move(slot));
  }
  EXPECT_EQ(slots.in_use(), 2);
  auto refused = slots.Acquire();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("2 concurrent Session streams"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("--max_sessions"), std::string::npos);
  held.pop_back();
  EXPECT_EQ(slots.in_use(), 1);
  EXPECT_TRUE(slots.Acquire().ok());  // taken and given back at once
  EXPECT_EQ(slots.in_use(), 1);
}

}  // namespace
}  // namespace corescape
