#include "runtime/comm/hello_message.h"

#include "gtest/gtest.h"

namespace corescape::comm {
namespace {

HelloMessage Sample() {
  HelloMessage m;
  m.type = HelloType::kAccept;
  m.generation = 0x0102030405060708ULL;
  m.rank = 3;
  m.world_size = 5;
  m.settings_fingerprint = 42;
  m.job_id = "job-7";
  m.token = "s3cr3t";
  return m;
}

TEST(HelloMessageTest, RoundTrip) {
  absl::StatusOr<HelloMessage::Bytes> bytes = Sample().Serialize();
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<HelloMessage> back =
      HelloMessage::Parse(absl::string_view(bytes->data(), bytes->size()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->type, HelloType::kAccept);
  EXPECT_EQ(back->generation, 0x0102030405060708ULL);
  EXPECT_EQ(back->rank, 3);
  EXPECT_EQ(back->world_size, 5);
  EXPECT_EQ(back->settings_fingerprint, 42u);
  EXPECT_EQ(back->job_id, "job-7");
  EXPECT_EQ(back->token, "s3cr3t");
}

TEST(HelloMessageTest, RejectsOversizeFields) {
  HelloMessage m = Sample();
  m.token = std::string(kMaxTokenBytes + 1, 'x');
  EXPECT_FALSE(m.Serialize().ok());
  m = Sample();
  m.job_id = std::string(kMaxJobIdBytes + 1, 'x');
  EXPECT_FALSE(m.Serialize().ok());
  m = Sample();
  m.reason = std::string(1000, 'r');  // truncated, not an error
  absl::StatusOr<HelloMessage::Bytes> bytes = m.Serialize();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(HelloMessage::Parse(absl::string_view(bytes->data(), bytes->size()))->reason.size(),
            kMaxReasonBytes);
}

TEST(HelloMessageTest, RejectsCorruptInput) {
  HelloMessage::Bytes good = *Sample().Serialize();
  auto parse = [](const HelloMessage::Bytes& b) {
    return HelloMessage::Parse(absl::string_view(b.data(), b.size()));
  };
  EXPECT_FALSE(HelloMessage::Parse(absl::string_view(good.data(), 100)).ok());  // short
  HelloMessage::Bytes b = good;
  b[0] = 'X';  // magic
  EXPECT_NE(parse(b).status().message().find("magic"), std::string::npos);
  b = good;
  b[200] ^= 1;  // payload bit flip
  EXPECT_NE(parse(b).status().message().find("checksum"), std::string::npos);
  b = good;
  b[4] = 9;  // version
  EXPECT_NE(parse(b).status().message().find("version"), std::string::npos);
  HelloMessage m = Sample();
  m.rank = 5;  // rank == world size
  b = *m.Serialize();
  EXPECT_NE(parse(b).status().message().find("outside world size"), std::string::npos);
  std::string garbage(kHelloBytes, '\xff');
  EXPECT_FALSE(HelloMessage::Parse(garbage).ok());
}

TEST(HelloMessageTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace
}  // namespace corescape::comm
