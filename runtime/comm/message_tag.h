#ifndef CORESCAPE_RUNTIME_COMM_MESSAGE_TAG_H_
#define CORESCAPE_RUNTIME_COMM_MESSAGE_TAG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/comm/comm_types.h"

namespace corescape::comm {

// The 64-bit UCP tag of every data-plane message. Receives are posted with
// the exact tag and a full mask, so the tag is the message header: a message
// of another communicator, generation, operation, step or sender never
// matches, and its payload lands directly in the caller's buffer (no header
// to strip, no extra copy). Sizes are checked on completion.
//
//   bits 63..48  communicator key: hash(job, token, world size, settings)
//                + generation * kGenerationStride (mod 2^16), so any two
//                generations within 65,536 of each other never match, and a
//                process without the token cannot produce a matching tag
//   bits 47..36  sender rank (world size <= 4096)
//   bits 35..34  channel: collective, point-to-point or control
//   bits 33..0   collective: kind (3 bits) | sequence number mod 2^16 |
//                message index within the operation (15 bits)
//                point-to-point: the caller's tag (32 bits)
//                control: 0
enum class TagChannel : uint8_t { kCollective = 0, kPointToPoint = 1, kControl = 2 };

inline constexpr int kMaxWorldSize = 1 << 12;
inline constexpr uint32_t kMaxMessageIndex = (1u << 15) - 1;
inline constexpr uint64_t kMaxUserTag = (uint64_t{1} << 32) - 1;
inline constexpr uint64_t kFullTagMask = ~uint64_t{0};

struct DecodedTag {
  uint16_t key = 0;
  int source_rank = 0;
  TagChannel channel = TagChannel::kCollective;
  CollectiveKind kind = CollectiveKind::kAllReduce;  // collective only
  uint16_t sequence = 0;                             // collective only
  uint32_t message_index = 0;                        // collective only
  uint32_t user_tag = 0;                             // point-to-point only
};

// The 16-bit communicator key. `secret_fingerprint` should mix in everything
// the ranks must agree on (job, token, world size, algorithm settings).
uint16_t CommunicatorKey(uint64_t secret_fingerprint, uint64_t generation);

uint64_t CollectiveTag(uint16_t key, int source_rank, CollectiveKind kind,
                       uint64_t sequence, uint32_t message_index);
uint64_t PointToPointTag(uint16_t key, int source_rank, uint32_t user_tag);
uint64_t ControlTag(uint16_t key, int source_rank);

// Splits a tag into its fields; fails on bit patterns no encoder produces.
absl::StatusOr<DecodedTag> DecodeTag(uint64_t tag);
std::string TagDebugString(uint64_t tag);

// 64-bit FNV-1a, used for fingerprints (stable across processes and builds).
uint64_t Fingerprint64(absl::string_view bytes, uint64_t seed = 0);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_MESSAGE_TAG_H_
