#include "runtime/comm/control_message.h"

#include "absl/strings/str_cat.h"
#include "runtime/comm/wire_codec.h"

namespace corescape::comm {
namespace {

constexpr uint32_t kControlMagic = 0x43435343;  // "CSCC" little-endian
constexpr uint16_t kControlVersion = 1;
constexpr size_t kReasonOffset = 34;
constexpr size_t kChecksumOffset = kControlBytes - 4;
static_assert(kReasonOffset + kMaxControlReasonBytes <= kChecksumOffset);

}  // namespace

absl::string_view ControlTypeName(ControlType type) {
  switch (type) {
    case ControlType::kGoodbye: return "goodbye";
    case ControlType::kGoodbyeAck: return "goodbye-ack";
    case ControlType::kAbort: return "abort";
  }
  return "unknown";
}

ControlMessage::Bytes ControlMessage::Serialize() const {
  Bytes out{};
  char* p = out.data();
  wire::PutU32(p, kControlMagic);
  wire::PutU16(p + 4, kControlVersion);
  p[6] = static_cast<char>(type);
  wire::PutU64(p + 8, generation);
  wire::PutU32(p + 16, static_cast<uint32_t>(from_rank));
  wire::PutU64(p + 24, completed_collectives);
  size_t len = reason.size() < kMaxControlReasonBytes ? reason.size() : kMaxControlReasonBytes;
  wire::PutU16(p + 32, static_cast<uint16_t>(len));
  wire::PutBytes(p + kReasonOffset, reason, kMaxControlReasonBytes);
  wire::PutU32(p + kChecksumOffset, wire::Checksum32(p, kChecksumOffset));
  return out;
}

absl::StatusOr<ControlMessage> ControlMessage::Parse(absl::string_view bytes) {
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("malformed control message: ", why));
  };
  if (bytes.size() != kControlBytes) {
    return bad(absl::StrCat(bytes.size(), " bytes instead of ", kControlBytes));
  }
  const char* p = bytes.data();
  if (wire::GetU32(p) != kControlMagic) {
    return bad(absl::StrCat("bad magic 0x", absl::Hex(wire::GetU32(p))));
  }
  if (wire::GetU16(p + 4) != kControlVersion) {
    return bad(absl::StrCat("version ", wire::GetU16(p + 4)));
  }
  if (wire::GetU32(p + kChecksumOffset) != wire::Checksum32(p, kChecksumOffset)) {
    return bad("checksum mismatch");
  }
  uint8_t type = static_cast<uint8_t>(p[6]);
  if (type < 1 || type > 3) return bad(absl::StrCat("unknown type ", type));
  uint16_t len = wire::GetU16(p + 32);
  if (len > kMaxControlReasonBytes) return bad("reason length out of range");
  ControlMessage m;
  m.type = static_cast<ControlType>(type);
  m.generation = wire::GetU64(p + 8);
  m.from_rank = static_cast<int32_t>(wire::GetU32(p + 16));
  m.completed_collectives = wire::GetU64(p + 24);
  m.reason.assign(p + kReasonOffset, len);
  return m;
}

}  // namespace corescape::comm
