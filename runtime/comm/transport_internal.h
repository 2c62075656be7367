#ifndef CORESCAPE_RUNTIME_COMM_TRANSPORT_INTERNAL_H_
#define CORESCAPE_RUNTIME_COMM_TRANSPORT_INTERNAL_H_

// Pieces of Transport shared by transport.cc and transport_connections.cc.

#include <sys/socket.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ucp/api/ucp.h>

#include "absl/status/statusor.h"
#include "runtime/base/host_port.h"
#include "runtime/comm/handshake_stream.h"
#include "runtime/comm/hello_message.h"
#include "runtime/comm/transport.h"

namespace corescape::comm {

struct ResolvedAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};
// getaddrinfo for a HOST:PORT (passive: for listening; wildcard hosts allowed).
absl::StatusOr<ResolvedAddress> ResolveAddress(const HostPort& host_port, bool passive);
uint16_t SockaddrPort(const sockaddr_storage& addr);
std::string SockaddrToString(const sockaddr_storage& addr);  // "1.2.3.4:5" / "[::1]:5"

// The UCP active-message id of data messages, and their header: the 64-bit
// tag and the link token, little-endian.
inline constexpr unsigned kDataMessageAmId = 1;
inline constexpr size_t kDataHeaderBytes = 16;
// The dialer's first active message on its UCP endpoint: the bind token of
// its handshake connection as the header, no data (handshake_stream.h).
inline constexpr unsigned kBindMessageAmId = 2;

// A data message from an adopted (or still-being-checked) endpoint that no
// receive has taken yet.
struct Transport::ArrivedMessage {
  uint64_t tag = 0;
  uint64_t link_token = 0;
  EndpointId from = 0;
  size_t length = 0;
  bool rendezvous = false;  // the data is still at the sender
  // Kept beyond the UCX callback: UCX's descriptor (rendezvous) or buffer
  // (eager), released with ucp_am_data_release; or a copy.
  void* held = nullptr;
  std::unique_ptr<char[]> copy;

  const void* payload() const { return held != nullptr ? held : copy.get(); }
  size_t held_bytes() const { return rendezvous ? 0 : length; }
};

struct Transport::EndpointState {
  // kAwaitingConfirm: an accepted hello, the dialer's proof not yet checked.
  enum class Role { kConnecting, kAccepting, kParked, kAwaitingConfirm, kOwned };
  struct ErrorArg {
    Transport* transport;
    EndpointId id;
  };

  // A data message sent before the link was ready (bound): sent once it is.
  struct HeldSend {
    std::shared_ptr<MessageRequest> request;
    uint64_t tag = 0;
    const void* data = nullptr;
    int64_t bytes = 0;
  };

  EndpointId id = 0;
  std::string peer_address;
  // This side's own UCP endpoint to the peer (made from the worker address
  // the peer sent after the proofs): everything sent goes on it. Null
  // until then.
  ucp_ep_h ep = nullptr;
  // The UCP endpoint the peer's messages arrive on (UCX's counterpart of the
  // peer's own endpoint, named by the peer's bind message). UCX owns it and
  // may destroy it when the peer fails: it only identifies arrivals, nothing
  // is sent on it.
  ucp_ep_h reply_ep = nullptr;
  // The handshake connection (handshake_stream.h): open for the link's life.
  int socket = -1;
  bool socket_connected = false;  // the dialer's non-blocking connect finished
  HandshakeInbox inbox;
  std::string outbox;             // bytes not yet written to `socket`
  bool close_when_written = false;
  // This side may send data messages: the peer has bound `ep` (said so
  // with kBoundByte).
  bool ready = false;
  std::string bind_token;  // what our ready frame asked the peer to send back
  std::vector<HeldSend> held_sends;
  Role role = Role::kOwned;
  bool failed = false;         // UCX reported an error
  bool closing = false;        // Close() called: no new sends
  bool close_started = false;  // ucp_ep_close_nbx issued
  std::function<void(absl::Status)> on_error;
  ConnectCallback connect_done;
  // kAwaitingConfirm: the (job, generation) whose handler accepted the hello.
  std::pair<std::string, uint64_t> handler_key;
  // Set by the communicator that adopted the endpoint: what it may carry.
  std::optional<EndpointAuthorization> authorization;
  ErrorArg error_arg{nullptr, 0};  // stable address handed to UCX
};

// A UCX operation other than a data message (flush, close):
// `done` runs on the progress thread, outside UCX callbacks.
struct Transport::PendingUcxOp {
  Transport* transport = nullptr;
  std::function<void(ucs_status_t status, size_t length)> done;
  size_t length = 0;
  bool completed = false;  // UCX's callback has run (possibly inside the post)
};

struct Transport::ParkedHello {
  EndpointId id = 0;
  HelloMessage hello;
  absl::Time deadline;
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_TRANSPORT_INTERNAL_H_
