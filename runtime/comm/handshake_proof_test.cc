#include "runtime/comm/handshake_proof.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/comm/hello_message.h"

namespace corescape::comm {
namespace {

HandshakeTranscript Sample() {
  return {.job_id = "job-1",
          .generation = 3,
          .world_size = 4,
          .settings_fingerprint = 99,
          .dialer_rank = 0,
          .acceptor_rank = 2,
          .dialer_nonce = std::string(kHandshakeNonceBytes, 'd'),
          .acceptor_nonce = std::string(kHandshakeNonceBytes, 'a')};
}

TEST(HandshakeProofTest, EveryFieldSideAndSecretChangesTheProof) {
  const std::string secret = "s3cret";
  std::set<std::string> proofs;
  auto add = [&](HandshakeSide side, const std::string& key, const HandshakeTranscript& t) {
    const std::string proof = HandshakeProof(side, key, t);
    EXPECT_EQ(proof.size(), kHandshakeProofBytes);
    EXPECT_EQ(proof, HandshakeProof(side, key, t));  // deterministic
    EXPECT_EQ(proof.find(key), std::string::npos);
    proofs.insert(proof);
  };
  add(HandshakeSide::kAcceptor, secret, Sample());
  add(HandshakeSide::kDialer, secret, Sample());
  add(HandshakeSide::kAcceptor, "other", Sample());
  // One change each; the last moves bytes between length-prefixed fields.
  const std::vector<std::function<void(HandshakeTranscript&)>> changes = {
      [](HandshakeTranscript& t) { t.job_id = "job-2"; },
      [](HandshakeTranscript& t) { t.generation = 4; },
      [](HandshakeTranscript& t) { t.world_size = 5; },
      [](HandshakeTranscript& t) { t.settings_fingerprint = 100; },
      [](HandshakeTranscript& t) { t.dialer_rank = 1; },
      [](HandshakeTranscript& t) { t.acceptor_rank = 3; },
      [](HandshakeTranscript& t) { t.dialer_nonce[0] = 'x'; },
      [](HandshakeTranscript& t) { t.acceptor_nonce[31] = 'x'; },
      [](HandshakeTranscript& t) {
        t.job_id = "job-1d";
        t.dialer_nonce = std::string(kHandshakeNonceBytes - 1, 'd');
      },
  };
  for (const auto& change : changes) {
    HandshakeTranscript t = Sample();
    change(t);
    add(HandshakeSide::kAcceptor, secret, t);
  }
  EXPECT_EQ(proofs.size(), 3 + changes.size());
}

TEST(HandshakeProofTest, TheLinkTokenIsNeitherProofAndChangesWithTheAttempt) {
  const std::string secret = "s3cret";
  const uint64_t token = LinkToken(secret, Sample());
  EXPECT_EQ(token, LinkToken(secret, Sample()));  // both sides derive the same one
  EXPECT_NE(token, LinkToken("other", Sample()));
  HandshakeTranscript other_attempt = Sample();
  other_attempt.acceptor_nonce[0] = 'x';
  EXPECT_NE(token, LinkToken(secret, other_attempt));
  // Not a prefix of either proof, which travel on the wire.
  for (HandshakeSide side : {HandshakeSide::kAcceptor, HandshakeSide::kDialer}) {
    const std::string proof = HandshakeProof(side, secret, Sample());
    EXPECT_EQ(proof.find(std::string(reinterpret_cast<const char*>(&token), sizeof(token))),
              std::string::npos);
  }
}

TEST(HandshakeProofTest, NoncesAreFresh) {
  std::set<std::string> nonces;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<std::string> nonce = NewHandshakeNonce();
    ASSERT_TRUE(nonce.ok());
    EXPECT_EQ(nonce->size(), kHandshakeNonceBytes);
    nonces.insert(*nonce);
  }
  EXPECT_EQ(nonces.size(), 100u);
}

}  // namespace
}  // namespace corescape::comm
