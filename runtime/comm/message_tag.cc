#include "runtime/comm/message_tag.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace corescape::comm {
namespace {

constexpr int kKeyShift = 48;
constexpr int kRankShift = 36;
constexpr int kChannelShift = 34;
constexpr int kKindShift = 31;
constexpr int kSequenceShift = 15;
constexpr uint64_t kRankMask = (1u << 12) - 1;
constexpr uint64_t kPayloadMask = (uint64_t{1} << 34) - 1;
// Odd, so generation -> generation * stride is a bijection mod 2^16.
constexpr uint64_t kGenerationStride = 0x9E37;

uint64_t Header(uint16_t key, int source_rank, TagChannel channel) {
  DCHECK(source_rank >= 0 && source_rank < kMaxWorldSize) << source_rank;
  return (uint64_t{key} << kKeyShift) |
         ((static_cast<uint64_t>(source_rank) & kRankMask) << kRankShift) |
         (static_cast<uint64_t>(channel) << kChannelShift);
}

}  // namespace

uint64_t Fingerprint64(absl::string_view bytes, uint64_t seed) {
  uint64_t hash = 0xcbf29ce484222325ULL ^ (seed * 0x100000001b3ULL);
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

uint16_t CommunicatorKey(uint64_t secret_fingerprint, uint64_t generation) {
  uint64_t folded = secret_fingerprint ^ (secret_fingerprint >> 16) ^
                    (secret_fingerprint >> 32) ^ (secret_fingerprint >> 48);
  return static_cast<uint16_t>(folded + generation * kGenerationStride);
}

uint64_t CollectiveTag(uint16_t key, int source_rank, CollectiveKind kind,
                       uint64_t sequence, uint32_t message_index) {
  DCHECK_LE(message_index, kMaxMessageIndex);
  return Header(key, source_rank, TagChannel::kCollective) |
         (static_cast<uint64_t>(kind) << kKindShift) |
         ((sequence & 0xFFFF) << kSequenceShift) |
         (message_index & kMaxMessageIndex);
}

uint64_t PointToPointTag(uint16_t key, int source_rank, uint32_t user_tag) {
  return Header(key, source_rank, TagChannel::kPointToPoint) | user_tag;
}

uint64_t ControlTag(uint16_t key, int source_rank) {
  return Header(key, source_rank, TagChannel::kControl);
}

absl::StatusOr<DecodedTag> DecodeTag(uint64_t tag) {
  DecodedTag out;
  out.key = static_cast<uint16_t>(tag >> kKeyShift);
  out.source_rank = static_cast<int>((tag >> kRankShift) & kRankMask);
  uint64_t channel = (tag >> kChannelShift) & 3;
  uint64_t payload = tag & kPayloadMask;
  switch (channel) {
    case 0: {
      out.channel = TagChannel::kCollective;
      uint64_t kind = payload >> kKindShift;
      if (kind >= kNumCollectiveKinds) {
        return absl::InvalidArgumentError(
            absl::StrCat("tag 0x", absl::Hex(tag), ": unknown collective kind ", kind));
      }
      out.kind = static_cast<CollectiveKind>(kind);
      out.sequence = static_cast<uint16_t>((payload >> kSequenceShift) & 0xFFFF);
      out.message_index = static_cast<uint32_t>(payload & kMaxMessageIndex);
      return out;
    }
    case 1:
      out.channel = TagChannel::kPointToPoint;
      if (payload > kMaxUserTag) {
        return absl::InvalidArgumentError(
            absl::StrCat("tag 0x", absl::Hex(tag), ": point-to-point tag over 32 bits"));
      }
      out.user_tag = static_cast<uint32_t>(payload);
      return out;
    case 2:
      out.channel = TagChannel::kControl;
      if (payload != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("tag 0x", absl::Hex(tag), ": control tag with a payload"));
      }
      return out;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("tag 0x", absl::Hex(tag), ": unknown channel 3"));
  }
}

std::string TagDebugString(uint64_t tag) {
  absl::StatusOr<DecodedTag> d = DecodeTag(tag);
  if (!d.ok()) return std::string(d.status().message());
  switch (d->channel) {
    case TagChannel::kCollective:
      return absl::StrCat("key ", d->key, " from rank ", d->source_rank, " ",
                          CollectiveKindName(d->kind), " seq ", d->sequence,
                          " message ", d->message_index);
    case TagChannel::kPointToPoint:
      return absl::StrCat("key ", d->key, " from rank ", d->source_rank,
                          " point-to-point tag ", d->user_tag);
    case TagChannel::kControl:
      return absl::StrCat("key ", d->key, " from rank ", d->source_rank, " control");
  }
  return "?";
}

}  // namespace corescape::comm
