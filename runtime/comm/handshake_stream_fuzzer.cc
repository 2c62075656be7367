// Fuzzes what a data-plane handshake connection parses of its peer's bytes,
// the first bytes a stranger can send to a listening transport: the
// acceptor's side (hello, confirmation, ready frame, bound byte, then
// silence) and the dialer's (answer, ready frame, bound byte, then silence),
// fed in reads of the size
// the transport makes. Input: one byte choosing the side (low bit) and the
// largest read (the rest + 1), then the peer's bytes.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_target.h"
#include "runtime/comm/handshake_stream.h"
#include "runtime/comm/hello_message.h"

namespace corescape::fuzz {
namespace {

using comm::HandshakeInbox;

// Feeds `input` to `inbox` until the expected item is complete; false if
// the inbox refused a byte or the input ran out first.
bool Collect(HandshakeInbox& inbox, absl::string_view& input, size_t max_read) {
  while (!inbox.complete()) {
    if (input.empty()) return false;
    const size_t n = std::min({inbox.Needed(), max_read, input.size()});
    if (!inbox.Append(input.substr(0, n)).ok()) return false;
    input.remove_prefix(n);
  }
  return true;
}

std::string HelloBytes(comm::HelloType type) {
  comm::HelloMessage hello;
  hello.type = type;
  hello.generation = 7;
  hello.rank = 0;
  hello.world_size = 2;
  hello.job_id = "job-42";
  if (type == comm::HelloType::kHello || type == comm::HelloType::kAccept) {
    hello.nonce = std::string(comm::kHandshakeNonceBytes, '\x5a');
  }
  if (type == comm::HelloType::kAccept || type == comm::HelloType::kConfirm) {
    hello.proof = std::string(comm::kHandshakeProofBytes, '\xa5');
  }
  auto bytes = hello.Serialize();
  return bytes.ok() ? std::string(bytes->data(), bytes->size()) : std::string();
}

}  // namespace

bool ParseFuzzInput(absl::string_view input) {
  if (input.empty()) return false;
  const bool acceptor = (input[0] & 1) == 0;
  const size_t max_read = (static_cast<unsigned char>(input[0]) >> 1) + 1;
  input.remove_prefix(1);
  HandshakeInbox inbox;
  inbox.Expect(HandshakeInbox::Item::kHello);
  if (!Collect(inbox, input, max_read)) return false;
  auto first = inbox.TakeHello();
  if (!first.ok()) return false;
  if (acceptor) {
    if (first->type != comm::HelloType::kHello) return false;
    inbox.Expect(HandshakeInbox::Item::kHello);
    if (!Collect(inbox, input, max_read)) return false;
    if (!inbox.TakeHello().ok()) return false;
  }
  inbox.Expect(HandshakeInbox::Item::kReadyFrame);
  if (!Collect(inbox, input, max_read)) return false;
  auto frame = inbox.TakeReadyFrame();
  if (!frame.ok() || frame->bind_token.size() != comm::kBindTokenBytes ||
      frame->worker_address.empty() ||
      frame->worker_address.size() > comm::kMaxWorkerAddressBytes) {
    return false;
  }
  inbox.Expect(HandshakeInbox::Item::kBoundByte);
  if (!Collect(inbox, input, max_read)) return false;
  if (!inbox.TakeBoundByte().ok()) return false;
  // Afterwards the connection carries nothing: any byte is refused.
  return inbox.Append(input).ok() && input.empty();
}

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds;
  auto ready = comm::EncodeReadyFrame({.bind_token = std::string(comm::kBindTokenBytes, '\x11'),
                                       .worker_address = std::string(186, '\x42')});
  if (ready.ok()) {
    for (char chooser : {'\x00', '\xfe', '\x40'}) {  // reads of 1, 128, 33 bytes
      seeds.push_back(std::string(1, chooser) + HelloBytes(comm::HelloType::kHello) +
                      HelloBytes(comm::HelloType::kConfirm) + *ready +
                      std::string(1, comm::kBoundByte));
    }
    for (char chooser : {'\x01', '\xff', '\x41'}) {
      seeds.push_back(std::string(1, chooser) + HelloBytes(comm::HelloType::kAccept) + *ready +
                      std::string(1, comm::kBoundByte));
    }
  }
  return seeds;
}

}  // namespace corescape::fuzz
