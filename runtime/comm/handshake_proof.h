#ifndef CORESCAPE_RUNTIME_COMM_HANDSHAKE_PROOF_H_
#define CORESCAPE_RUNTIME_COMM_HANDSHAKE_PROOF_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::comm {

// The job's data-plane secret (CommunicatorOptions::secret_token) stays in
// the process; it is bounded only to keep options sane.
inline constexpr size_t kMaxSecretBytes = 128;

// What both sides of one connection attempt agree on; each proof covers all
// of it, so a proof is good for exactly one attempt between exactly these
// two ranks of this communicator (fresh nonces on both sides defeat replay).
struct HandshakeTranscript {
  std::string job_id;
  uint64_t generation = 0;
  int32_t world_size = 0;
  uint64_t settings_fingerprint = 0;
  int32_t dialer_rank = 0;
  int32_t acceptor_rank = 0;
  std::string dialer_nonce;
  std::string acceptor_nonce;
};

enum class HandshakeSide { kAcceptor, kDialer };

// HMAC-SHA256(secret, side || transcript), kHandshakeProofBytes bytes. The
// two sides' proofs differ, so neither can be reflected back as the other.
std::string HandshakeProof(HandshakeSide side, absl::string_view secret,
                           const HandshakeTranscript& transcript);

// The token every data message on the connection this transcript opened
// carries (both directions): HMAC-SHA256(secret, label || transcript),
// truncated to 64 bits. Only the two ranks that completed the handshake
// know it, so a process without the secret that forges the UCX header
// naming a member's connection still cannot produce it; anyone who can read
// the (unencrypted) traffic can.
uint64_t LinkToken(absl::string_view secret, const HandshakeTranscript& transcript);

// kHandshakeNonceBytes fresh bytes from the kernel's CSPRNG.
absl::StatusOr<std::string> NewHandshakeNonce();

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_HANDSHAKE_PROOF_H_
