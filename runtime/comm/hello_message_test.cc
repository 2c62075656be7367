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
  m.nonce = std::string(kHandshakeNonceBytes, 'n');
  m.proof = std::string(kHandshakeProofBytes, 'p');
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
  EXPECT_EQ(back->nonce, std::string(kHandshakeNonceBytes, 'n'));
  EXPECT_EQ(back->proof, std::string(kHandshakeProofBytes, 'p'));
}

TEST(HelloMessageTest, RejectsOversizeFields) {
  HelloMessage m = Sample();
  m.nonce = "short";
  EXPECT_FALSE(m.Serialize().ok());
  m = Sample();
  m.proof = std::string(kHandshakeProofBytes + 1, 'x');
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

TEST(HelloMessageTest, EachTypeCarriesItsNonceAndProof) {
  auto parse = [](const HelloMessage& m) -> absl::StatusOr<HelloMessage> {
    absl::StatusOr<HelloMessage::Bytes> b = m.Serialize();
    if (!b.ok()) return b.status();
    return HelloMessage::Parse(absl::string_view(b->data(), b->size()));
  };
  HelloMessage accept = Sample();
  accept.proof.clear();
  EXPECT_NE(parse(accept).status().message().find("proof is missing"), std::string::npos);
  HelloMessage hello = Sample();
  hello.type = HelloType::kHello;
  hello.proof.clear();
  EXPECT_TRUE(parse(hello).ok());
  hello.nonce.clear();
  EXPECT_FALSE(parse(hello).ok());
  HelloMessage confirm = Sample();
  confirm.type = HelloType::kConfirm;
  confirm.nonce.clear();
  ASSERT_TRUE(parse(confirm).ok());
  EXPECT_EQ(parse(confirm)->type, HelloType::kConfirm);
  confirm.proof.clear();
  EXPECT_FALSE(parse(confirm).ok());
  HelloMessage reject = Sample();
  reject.type = HelloType::kReject;
  reject.nonce.clear();
  reject.proof.clear();
  reject.reason = "no";
  EXPECT_TRUE(parse(reject).ok());
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
