#include "runtime/comm/hello_message.h"

#include "absl/strings/str_cat.h"
#include "runtime/comm/wire_codec.h"

namespace corescape::comm {
namespace {

constexpr uint32_t kHelloMagic = 0x48435343;  // "CSCH" little-endian
// Version 2: challenge-response proofs instead of a secret token.
constexpr uint16_t kHelloVersion = 2;
constexpr size_t kJobOffset = 40;
constexpr size_t kNonceOffset = kJobOffset + kMaxJobIdBytes;
constexpr size_t kProofOffset = kNonceOffset + kHandshakeNonceBytes;
constexpr size_t kReasonOffset = 296;
static_assert(kProofOffset + kHandshakeProofBytes <= kReasonOffset);
constexpr size_t kChecksumOffset = kReasonOffset + kMaxReasonBytes;
static_assert(kChecksumOffset + 4 <= kHelloBytes);

}  // namespace

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  size_t n = a.size() > b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

absl::StatusOr<HelloMessage::Bytes> HelloMessage::Serialize() const {
  if (job_id.size() > kMaxJobIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("job id is ", job_id.size(), " bytes; at most ", kMaxJobIdBytes));
  }
  if (!nonce.empty() && nonce.size() != kHandshakeNonceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("nonce is ", nonce.size(), " bytes, not ", kHandshakeNonceBytes));
  }
  if (!proof.empty() && proof.size() != kHandshakeProofBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("proof is ", proof.size(), " bytes, not ", kHandshakeProofBytes));
  }
  Bytes out{};
  char* p = out.data();
  wire::PutU32(p + 0, kHelloMagic);
  wire::PutU16(p + 4, kHelloVersion);
  p[6] = static_cast<char>(type);
  wire::PutU64(p + 8, generation);
  wire::PutU32(p + 16, static_cast<uint32_t>(rank));
  wire::PutU32(p + 20, static_cast<uint32_t>(world_size));
  wire::PutU64(p + 24, settings_fingerprint);
  size_t reason_len = reason.size() < kMaxReasonBytes ? reason.size() : kMaxReasonBytes;
  wire::PutU16(p + 32, static_cast<uint16_t>(job_id.size()));
  p[34] = static_cast<char>(nonce.size());
  p[35] = static_cast<char>(proof.size());
  wire::PutU16(p + 36, static_cast<uint16_t>(reason_len));
  wire::PutBytes(p + kJobOffset, job_id, kMaxJobIdBytes);
  wire::PutBytes(p + kNonceOffset, nonce, kHandshakeNonceBytes);
  wire::PutBytes(p + kProofOffset, proof, kHandshakeProofBytes);
  wire::PutBytes(p + kReasonOffset, reason, kMaxReasonBytes);
  wire::PutU32(p + kChecksumOffset, wire::Checksum32(p, kChecksumOffset));
  return out;
}

absl::StatusOr<HelloMessage> HelloMessage::Parse(absl::string_view bytes) {
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("malformed handshake: ", why));
  };
  if (bytes.size() != kHelloBytes) {
    return bad(absl::StrCat(bytes.size(), " bytes instead of ", kHelloBytes));
  }
  const char* p = bytes.data();
  if (wire::GetU32(p) != kHelloMagic) {
    return bad(absl::StrCat("bad magic 0x", absl::Hex(wire::GetU32(p)),
                            " (not a corescape data-plane peer)"));
  }
  if (wire::GetU16(p + 4) != kHelloVersion) {
    return bad(absl::StrCat("protocol version ", wire::GetU16(p + 4), ", expected ",
                            kHelloVersion));
  }
  if (wire::GetU32(p + kChecksumOffset) != wire::Checksum32(p, kChecksumOffset)) {
    return bad("checksum mismatch");
  }
  HelloMessage m;
  uint8_t type = static_cast<uint8_t>(p[6]);
  if (type < 1 || type > 4) return bad(absl::StrCat("unknown type ", type));
  m.type = static_cast<HelloType>(type);
  m.generation = wire::GetU64(p + 8);
  m.rank = static_cast<int32_t>(wire::GetU32(p + 16));
  m.world_size = static_cast<int32_t>(wire::GetU32(p + 20));
  m.settings_fingerprint = wire::GetU64(p + 24);
  uint16_t job_len = wire::GetU16(p + 32);
  const uint8_t nonce_len = static_cast<uint8_t>(p[34]);
  const uint8_t proof_len = static_cast<uint8_t>(p[35]);
  uint16_t reason_len = wire::GetU16(p + 36);
  if (job_len > kMaxJobIdBytes || reason_len > kMaxReasonBytes ||
      (nonce_len != 0 && nonce_len != kHandshakeNonceBytes) ||
      (proof_len != 0 && proof_len != kHandshakeProofBytes)) {
    return bad("field length out of range");
  }
  const bool needs_nonce = m.type == HelloType::kHello || m.type == HelloType::kAccept;
  const bool needs_proof = m.type == HelloType::kAccept || m.type == HelloType::kConfirm;
  if ((needs_nonce && nonce_len == 0) || (needs_proof && proof_len == 0)) {
    return bad("a nonce or proof is missing");
  }
  if (m.world_size < 1 || m.rank < 0 || m.rank >= m.world_size) {
    return bad(absl::StrCat("rank ", m.rank, " outside world size ", m.world_size));
  }
  m.job_id.assign(p + kJobOffset, job_len);
  m.nonce.assign(p + kNonceOffset, nonce_len);
  m.proof.assign(p + kProofOffset, proof_len);
  m.reason.assign(p + kReasonOffset, reason_len);
  return m;
}

}  // namespace corescape::comm
