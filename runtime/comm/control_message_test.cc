#include "runtime/comm/control_message.h"

#include "gtest/gtest.h"

namespace corescape::comm {
namespace {

TEST(ControlMessageTest, RoundTrip) {
  ControlMessage m;
  m.type = ControlType::kAbort;
  m.generation = 9;
  m.from_rank = 2;
  m.completed_collectives = 12345;
  m.reason = "timed out waiting for rank 1";
  ControlMessage::Bytes b = m.Serialize();
  absl::StatusOr<ControlMessage> back = ControlMessage::Parse(absl::string_view(b.data(), b.size()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->type, ControlType::kAbort);
  EXPECT_EQ(back->generation, 9u);
  EXPECT_EQ(back->from_rank, 2);
  EXPECT_EQ(back->completed_collectives, 12345u);
  EXPECT_EQ(back->reason, m.reason);
}

TEST(ControlMessageTest, RejectsCorruptInput) {
  ControlMessage m;
  ControlMessage::Bytes good = m.Serialize();
  ControlMessage::Bytes b = good;
  b[1] = 0;
  EXPECT_FALSE(ControlMessage::Parse(absl::string_view(b.data(), b.size())).ok());
  b = good;
  b[100] = 'x';
  EXPECT_FALSE(ControlMessage::Parse(absl::string_view(b.data(), b.size())).ok());
  b = good;
  b[6] = 7;  // type
  EXPECT_FALSE(ControlMessage::Parse(absl::string_view(b.data(), b.size())).ok());
  EXPECT_FALSE(ControlMessage::Parse(absl::string_view(good.data(), 511)).ok());
}

TEST(ControlMessageTest, LongReasonIsTruncated) {
  ControlMessage m;
  m.reason = std::string(5000, 'a');
  ControlMessage::Bytes b = m.Serialize();
  EXPECT_EQ(ControlMessage::Parse(absl::string_view(b.data(), b.size()))->reason.size(),
            kMaxControlReasonBytes);
}

}  // namespace
}  // namespace corescape::comm
