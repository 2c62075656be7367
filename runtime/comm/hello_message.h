#ifndef CORESCAPE_RUNTIME_COMM_HELLO_MESSAGE_H_
#define CORESCAPE_RUNTIME_COMM_HELLO_MESSAGE_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::comm {

// The first message on every endpoint, sent on the UCP stream of that
// endpoint (so the receiver knows which endpoint presented it). The
// connecting rank sends kHello; the accepting rank answers kAccept (carrying
// its own identity and the token, so both sides authenticate each other) or
// kReject with a reason, then closes.
//
// Fixed 512 bytes, little-endian:
//   0 magic "CSCH" | 4 version u16 | 6 type u8 | 7 zero u8 | 8 generation u64
//   16 rank i32 | 20 world_size i32 | 24 settings fingerprint u64
//   32 job_id length u16 | 34 token length u16 | 36 reason length u16 | 38 zero
//   40 job_id[128] | 168 token[128] | 296 reason[200] | 496 checksum u32
//   (FNV-1a of bytes 0..495) | 500 zero[12]
inline constexpr size_t kHelloBytes = 512;
inline constexpr size_t kMaxJobIdBytes = 128;
inline constexpr size_t kMaxTokenBytes = 128;
inline constexpr size_t kMaxReasonBytes = 200;

enum class HelloType : uint8_t { kHello = 1, kAccept = 2, kReject = 3 };

struct HelloMessage {
  HelloType type = HelloType::kHello;
  uint64_t generation = 0;
  int32_t rank = 0;
  int32_t world_size = 0;
  uint64_t settings_fingerprint = 0;  // algorithm settings the ranks must share
  std::string job_id;
  std::string token;
  std::string reason;  // kReject only; truncated to kMaxReasonBytes

  using Bytes = std::array<char, kHelloBytes>;
  // Fails if job_id or token is too long (reason is truncated instead).
  absl::StatusOr<Bytes> Serialize() const;
  // Validates magic, version, type, lengths, checksum and ranges.
  static absl::StatusOr<HelloMessage> Parse(absl::string_view bytes);
};

// Compares secrets in time independent of where they differ.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_HELLO_MESSAGE_H_
