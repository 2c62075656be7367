#ifndef CORESCAPE_RUNTIME_COMM_HELLO_HANDLER_TEST_UTIL_H_
#define CORESCAPE_RUNTIME_COMM_HELLO_HANDLER_TEST_UTIL_H_

// For tests that play the accepting side of the handshake on a bare
// Transport.

#include <string>

#include "runtime/comm/hello_message.h"
#include "runtime/comm/transport.h"

namespace corescape::comm {

// Accepts `hello` as `acceptor_rank`, challenging the dialer with `nonce`
// and offering `proof` (kHandshakeNonceBytes / kHandshakeProofBytes).
inline HelloHandler::Verdict AcceptingVerdict(const HelloMessage& hello, int32_t acceptor_rank,
                                              std::string nonce, std::string proof) {
  HelloHandler::Verdict v;
  v.accept = true;
  v.reply = hello;
  v.reply.type = HelloType::kAccept;
  v.reply.rank = acceptor_rank;
  v.reply.nonce = std::move(nonce);
  v.reply.proof = std::move(proof);
  return v;
}

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_HELLO_HANDLER_TEST_UTIL_H_
