#include "runtime/comm/handshake_proof.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/secrets.h"
#include "runtime/comm/hello_message.h"
#include "runtime/comm/wire_codec.h"

namespace corescape::comm {
namespace {

void AppendU64(std::string& out, uint64_t value) {
  char bytes[8];
  wire::PutU64(bytes, value);
  out.append(bytes, sizeof(bytes));
}

// Length-prefixed, so no two transcripts encode alike.
void AppendField(std::string& out, absl::string_view field) {
  AppendU64(out, field.size());
  out.append(field.data(), field.size());
}

// HMAC-SHA256(secret, label || transcript).
std::string TranscriptMac(absl::string_view label, absl::string_view secret,
                          const HandshakeTranscript& t) {
  std::string message(label);
  AppendField(message, t.job_id);
  AppendU64(message, t.generation);
  AppendU64(message, static_cast<uint32_t>(t.world_size));
  AppendU64(message, t.settings_fingerprint);
  AppendU64(message, static_cast<uint32_t>(t.dialer_rank));
  AppendU64(message, static_cast<uint32_t>(t.acceptor_rank));
  AppendField(message, t.dialer_nonce);
  AppendField(message, t.acceptor_nonce);
  return HmacSha256(secret, message);
}

}  // namespace

std::string HandshakeProof(HandshakeSide side, absl::string_view secret,
                           const HandshakeTranscript& transcript) {
  return TranscriptMac(side == HandshakeSide::kAcceptor ? "corescape.v1 handshake: acceptor"
                                                        : "corescape.v1 handshake: dialer",
                       secret, transcript);
}

uint64_t LinkToken(absl::string_view secret, const HandshakeTranscript& transcript) {
  const std::string mac = TranscriptMac("corescape.v1 handshake: link token", secret, transcript);
  return wire::GetU64(mac.data());
}

absl::StatusOr<std::string> NewHandshakeNonce() {
  return SecureRandomBytes(kHandshakeNonceBytes);
}

}  // namespace corescape::comm
