#ifndef CORESCAPE_RUNTIME_COMM_HANDSHAKE_STREAM_H_
#define CORESCAPE_RUNTIME_COMM_HANDSHAKE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/comm/hello_message.h"

namespace corescape::comm {

// What travels on a data-plane handshake connection: a plain TCP
// connection the transport accepts itself, so a stranger's bytes reach only
// this code (bounded, fixed sizes, fuzzed) and never UCX.
//   dialer   -> acceptor  HelloMessage kHello                 (kHelloBytes)
//   acceptor -> dialer    HelloMessage kAccept or kReject     (kHelloBytes)
//   dialer   -> acceptor  HelloMessage kConfirm or kReject    (kHelloBytes),
//                         with a kConfirm its ready frame
//   acceptor -> dialer    its ready frame (only after a valid kConfirm)
// A ready frame carries the sender's UCP worker address and a bind token.
// Each side creates its own UCP endpoint from the other's address and sends
// the other's token as its first active message on it; whoever receives
// its own token answers kBoundByte (it now knows which UCP endpoint the
// peer's messages arrive on), and each side sends data messages once its
// kBoundByte came.
// Afterwards the connection carries nothing; it stays open for the life of
// the link and its end (EOF, reset) is how each side learns the other went
// away. Any byte where none is expected ends it.
//
// Ready frame, little-endian: magic "CSRD" | address length u32 |
// bind token [16] | worker address [length].
inline constexpr size_t kReadyHeaderBytes = 24;
inline constexpr size_t kBindTokenBytes = 16;
// UCP worker addresses of UCX 1.13 are ~200 bytes with TCP and shared
// memory; a few devices more stay far below this.
inline constexpr size_t kMaxWorkerAddressBytes = 8192;
inline constexpr char kBoundByte = '\xb1';

struct ReadyFrame {
  std::string bind_token;      // kBindTokenBytes
  std::string worker_address;  // 1..kMaxWorkerAddressBytes
};

absl::StatusOr<std::string> EncodeReadyFrame(const ReadyFrame& frame);

// Collects one expected item from a handshake connection's bytes. Reads are
// sized by Needed(), so it never holds more than the item it expects and a
// peer's surplus stays unread (and ends the connection when read later).
class HandshakeInbox {
 public:
  enum class Item { kNothing, kHello, kReadyFrame, kBoundByte };

  // Starts collecting `what` (discarding anything collected before).
  void Expect(Item what);
  Item expecting() const { return expect_; }
  // How many more bytes the current item needs (0 when expecting nothing
  // or complete).
  size_t Needed() const;
  // Adds bytes read from the connection; fails (naming what was wrong) on
  // more bytes than Needed(), on bytes while expecting nothing, and on a
  // ready-frame header with a bad magic or length.
  absl::Status Append(absl::string_view bytes);
  bool complete() const { return expect_ != Item::kNothing && Needed() == 0; }

  // The completed item (complete() and expecting() of the matching kind).
  absl::StatusOr<HelloMessage> TakeHello();
  absl::StatusOr<ReadyFrame> TakeReadyFrame();
  absl::Status TakeBoundByte();

 private:
  Item expect_ = Item::kNothing;
  std::string buffer_;
  size_t ready_address_bytes_ = 0;  // from a validated ready header
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_HANDSHAKE_STREAM_H_
