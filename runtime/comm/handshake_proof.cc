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

}  // namespace

std::string HandshakeProof(HandshakeSide side, absl::string_view secret,
                           const HandshakeTranscript& t) {
  std::string message = side == HandshakeSide::kAcceptor ? "corescape.v1 handshake: acceptor"
                                                         : "corescape.v1 handshake: dialer";
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

absl::StatusOr<std::string> NewHandshakeNonce() {
  return SecureRandomBytes(kHandshakeNonceBytes);
}

}  // namespace corescape::comm
