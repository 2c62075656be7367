#ifndef CORESCAPE_RUNTIME_COMM_CONTROL_MESSAGE_H_
#define CORESCAPE_RUNTIME_COMM_CONTROL_MESSAGE_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::comm {

// Messages a communicator exchanges about itself (tag channel "control"):
//   kGoodbye     the sender is leaving cleanly after `completed_collectives`
//                collectives; its later disconnect is not a failure
//   kGoodbyeAck  the receiver has processed the goodbye (so every earlier
//                message from the sender has been matched); the sender may close
//   kAbort       the sender broke the communicator; `reason` says why (so the
//                error on every rank names the peer that started it)
//
// Fixed 512 bytes, little-endian:
//   0 magic "CSCC" | 4 version u16 | 6 type u8 | 7 zero | 8 generation u64
//   16 from_rank i32 | 20 zero u32 | 24 completed_collectives u64
//   32 reason length u16 | 34 reason[400] | 434 zero | 508 checksum u32
inline constexpr size_t kControlBytes = 512;
inline constexpr size_t kMaxControlReasonBytes = 400;

enum class ControlType : uint8_t { kGoodbye = 1, kGoodbyeAck = 2, kAbort = 3 };

struct ControlMessage {
  ControlType type = ControlType::kGoodbye;
  uint64_t generation = 0;
  int32_t from_rank = 0;
  uint64_t completed_collectives = 0;
  std::string reason;  // truncated to kMaxControlReasonBytes

  using Bytes = std::array<char, kControlBytes>;
  Bytes Serialize() const;
  // Validates magic, version, type, lengths and checksum.
  static absl::StatusOr<ControlMessage> Parse(absl::string_view bytes);
};

absl::string_view ControlTypeName(ControlType type);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_CONTROL_MESSAGE_H_
