#include "runtime/comm/handshake_proof.h"

#include <set>
#include <string>

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
  // The acceptor's proof with the same secret, over Sample() changed by `change`.
  auto add_changed = [&](auto change) {
    HandshakeTranscript t = Sample();
    change(t);
    add(HandshakeSide::kAcceptor, secret, t);
  };
  add_changed([](HandshakeTranscript& t) { t.job_id = "job-2"; });
  add_changed([](HandshakeTranscript& t) { t.generation = 4; });
  add_changed([](HandshakeTranscript& t) { t.world_size = 5; });
  add_changed([](HandshakeTranscript& t) { t.settings_fingerprint = 100; });
  add_changed([](HandshakeTranscript& t) { t.dialer_rank = 1; });
  add_changed([](HandshakeTranscript& t) { t.acceptor_rank = 3; });
  add_changed([](HandshakeTranscript& t) { t.dialer_nonce[0] = 'x'; });
  add_changed([](HandshakeTranscript& t) { t.acceptor_nonce[31] = 'x'; });
  // Moving bytes between length-prefixed fields changes the proof too.
  add_changed([](HandshakeTranscript& t) {
    t.job_id = "job-1d";
    t.dialer_nonce = std::string(kHandshakeNonceBytes - 1, 'd');
  });
  EXPECT_EQ(proofs.size(), 12u);
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
