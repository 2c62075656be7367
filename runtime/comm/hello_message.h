#ifndef CORESCAPE_RUNTIME_COMM_HELLO_MESSAGE_H_
#define CORESCAPE_RUNTIME_COMM_HELLO_MESSAGE_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::comm {

// The handshake on every endpoint, sent on its handshake connection (a
// plain TCP connection the transport accepts itself; handshake_stream.h).
// The job's secret is never sent: each side proves it knows it by an
// HMAC-SHA256 over both sides' fresh nonces and identities
// (handshake_proof.h).
//   dialer   -> kHello   (identity, nonce_d)
//   acceptor -> kAccept  (identity, nonce_a, proof_a)   or kReject (reason)
//   dialer   -> kConfirm (identity, proof_d)            or kReject (reason)
// The acceptor uses the endpoint only after a valid kConfirm; the dialer
// only after a valid kAccept.
//
// Fixed 512 bytes, little-endian:
//   0 magic "CSCH" | 4 version u16 | 6 type u8 | 7 zero u8 | 8 generation u64
//   16 rank i32 | 20 world_size i32 | 24 settings fingerprint u64
//   32 job_id length u16 | 34 nonce length u8 | 35 proof length u8
//   36 reason length u16 | 38 zero | 40 job_id[128] | 168 nonce[32]
//   200 proof[32] | 232 zero[64] | 296 reason[200] | 496 checksum u32
//   (FNV-1a of bytes 0..495) | 500 zero[12]
inline constexpr size_t kHelloBytes = 512;
inline constexpr size_t kMaxJobIdBytes = 128;
inline constexpr size_t kHandshakeNonceBytes = 32;
inline constexpr size_t kHandshakeProofBytes = 32;
inline constexpr size_t kMaxReasonBytes = 200;

enum class HelloType : uint8_t { kHello = 1, kAccept = 2, kReject = 3, kConfirm = 4 };

struct HelloMessage {
  HelloType type = HelloType::kHello;
  uint64_t generation = 0;
  int32_t rank = 0;
  int32_t world_size = 0;
  uint64_t settings_fingerprint = 0;  // algorithm settings the ranks must share
  std::string job_id;
  std::string nonce;   // kHello, kAccept: kHandshakeNonceBytes
  std::string proof;   // kAccept, kConfirm: kHandshakeProofBytes
  std::string reason;  // kReject only; truncated to kMaxReasonBytes

  using Bytes = std::array<char, kHelloBytes>;
  // Fails if job_id is too long or nonce/proof is neither empty nor of its
  // size (reason is truncated instead).
  absl::StatusOr<Bytes> Serialize() const;
  // Validates magic, version, type, lengths, checksum and ranges; a kHello
  // or kAccept must carry a nonce, a kAccept or kConfirm a proof.
  static absl::StatusOr<HelloMessage> Parse(absl::string_view bytes);
};

// Compares secrets in time independent of where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_HELLO_MESSAGE_H_
