// Transport: endpoints. The handshake connections (handshake_stream.h):
// outgoing ones (connect, hello, reply, ready frame, bind), incoming ones
// (the listener, hello, routing to the communicator that registered for its
// job and generation, parking until it does, rejection of strangers and
// stale generations, the ready frame once adopted, the bind), endpoint
// errors, and closing.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <ucp/api/ucp.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/base/secrets.h"
#include "runtime/comm/handshake_stream.h"
#include "runtime/comm/transport.h"
#include "runtime/comm/transport_internal.h"
#include "runtime/comm/ucx_status.h"
#include "runtime/comm/wire_codec.h"

namespace corescape::comm {
namespace {

// A flushed close that has not finished by then is forced.
constexpr absl::Duration kFlushCloseDeadline = absl::Seconds(2);
// At most one log line per interval about refused connections.
constexpr absl::Duration kRefusalLogInterval = absl::Seconds(1);

std::string DescribeHello(const HelloMessage& hello) {
  return absl::StrCat("rank ", hello.rank, "/", hello.world_size, " of job '",
                      wire::Printable(hello.job_id), "' generation ", hello.generation);
}

}  // namespace

absl::StatusOr<ResolvedAddress> ResolveAddress(const HostPort& host_port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  std::string port = std::to_string(host_port.port);
  int rc = getaddrinfo(host_port.host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0 || result == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host_port.ToString(), ": ",
                                               gai_strerror(rc)));
  }
  ResolvedAddress out;
  // Prefer IPv4 (UCX's TCP transport default order is inet, inet6).
  const addrinfo* pick = result;
  for (const addrinfo* a = result; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  std::memcpy(&out.storage, pick->ai_addr, pick->ai_addrlen);
  out.length = pick->ai_addrlen;
  freeaddrinfo(result);
  return out;
}

uint16_t SockaddrPort(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return 0;
}

std::string SockaddrToString(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, host, sizeof(host));
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, host,
              sizeof(host));
  } else {
    return "unknown address";
  }
  return HostPort{host, SockaddrPort(addr)}.ToString();
}

// ---------------------------------------------------------------------------
// Endpoint bookkeeping.

Transport::EndpointState* Transport::CreateEndpoint(const std::string& peer_address, int socket) {
  auto state = std::make_unique<EndpointState>();
  state->id = next_endpoint_id_++;
  state->peer_address = peer_address;
  state->socket = socket;
  state->error_arg = {this, state->id};
  EndpointState* raw = state.get();
  endpoints_[raw->id] = std::move(state);
  endpoint_by_socket_[socket] = raw->id;
  WatchSocket(raw);
  absl::MutexLock lock(&handlers_mu_);
  peer_addresses_[raw->id] = peer_address;
  return raw;
}

Transport::EndpointState* Transport::FindEndpoint(EndpointId id) {
  auto it = endpoints_.find(id);
  return it == endpoints_.end() ? nullptr : it->second.get();
}

void Transport::EraseEndpoint(EndpointId id) {
  if (EndpointState* endpoint = FindEndpoint(id); endpoint != nullptr) {
    for (ucp_ep_h ep : {endpoint->ep, endpoint->reply_ep}) {
      auto it = ep == nullptr ? endpoint_by_ep_.end() : endpoint_by_ep_.find(ep);
      if (it != endpoint_by_ep_.end() && it->second == id) endpoint_by_ep_.erase(it);
    }
    CloseSocket(endpoint);
  }
  endpoints_.erase(id);
  absl::MutexLock lock(&handlers_mu_);
  peer_addresses_.erase(id);
}

std::string Transport::PeerAddress(EndpointId endpoint) const {
  absl::MutexLock lock(&handlers_mu_);
  auto it = peer_addresses_.find(endpoint);
  return it == peer_addresses_.end() ? std::string() : it->second;
}

void Transport::SetErrorHandler(EndpointId endpoint, std::function<void(absl::Status)> on_error) {
  Enqueue([this, endpoint, on_error = std::move(on_error)]() mutable {
    EndpointState* state = FindEndpoint(endpoint);
    if (state == nullptr) return;
    state->on_error = std::move(on_error);
    if (state->failed && state->on_error) {
      // It failed before the owner was listening.
      state->on_error(absl::UnavailableError(
          absl::StrCat("connection to ", state->peer_address, " failed")));
    }
  });
}

// ---------------------------------------------------------------------------
// UCX operations other than data messages.

void Transport::TrackUcxOp(ucs_status_ptr_t result, PendingUcxOp* op) {
  if (result == nullptr) {
    FinishUcxOp(op, UCS_OK, op->length);
  } else if (UCS_PTR_IS_ERR(result)) {
    FinishUcxOp(op, UCS_PTR_STATUS(result), 0);
  } else if (!op->completed) {
    pending_ops_.insert(op);
  }
}

void Transport::OnUcxOpComplete(void* ucx_request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<PendingUcxOp*>(user_data);
  ucp_request_free(ucx_request);
  op->completed = true;
  op->transport->pending_ops_.erase(op);
  // Out of the UCX callback before anything else happens (closing endpoints
  // from inside one is not allowed).
  op->transport->Enqueue([op, status] { op->transport->FinishUcxOp(op, status, op->length); });
}

Transport::PendingUcxOp* Transport::NewUcxOp(
    std::function<void(ucs_status_t status, size_t length)> done, ucp_request_param_t& param) {
  auto* op = new PendingUcxOp;
  op->transport = this;
  op->done = std::move(done);
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &Transport::OnUcxOpComplete;
  param.user_data = op;
  return op;
}

void Transport::FinishUcxOp(PendingUcxOp* op, ucs_status_t status, size_t length) {
  op->done(status, length);
  delete op;
}

// ---------------------------------------------------------------------------
// Handshake sockets.

void Transport::WatchSocket(EndpointState* endpoint) {
  if (endpoint->socket < 0) return;
  epoll_event ev{};
  // Level-triggered: every readiness is acted on (read, written, or the
  // socket closed), so none repeats without progress.
  ev.events = EPOLLIN;
  if (!endpoint->socket_connected || !endpoint->outbox.empty()) ev.events |= EPOLLOUT;
  ev.data.u64 = endpoint->id;
  if (epoll_ctl(socket_epoll_fd_, EPOLL_CTL_MOD, endpoint->socket, &ev) != 0) {
    epoll_ctl(socket_epoll_fd_, EPOLL_CTL_ADD, endpoint->socket, &ev);
  }
}

void Transport::CloseSocket(EndpointState* endpoint) {
  if (endpoint->socket < 0) return;
  epoll_ctl(socket_epoll_fd_, EPOLL_CTL_DEL, endpoint->socket, nullptr);
  endpoint_by_socket_.erase(endpoint->socket);
  close(endpoint->socket);
  endpoint->socket = -1;
}

int Transport::PollSockets() {
  epoll_event events[32];
  const int n = epoll_wait(socket_epoll_fd_, events, 32, 0);
  for (int i = 0; i < n; ++i) {
    if (events[i].data.u64 == 0) {
      AcceptConnections();
    } else {
      OnSocketEvent(events[i].data.u64, events[i].events);
    }
  }
  return n < 0 ? 0 : n;
}

void Transport::AcceptConnections() {
  while (true) {
    sockaddr_storage from{};
    socklen_t from_length = sizeof(from);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_length,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        LOG(WARNING) << "data plane: accept: " << strerror(errno);
      }
      return;
    }
    size_t unproven = 0;
    for (const auto& [id, e] : endpoints_) {
      unproven += (e->role == EndpointState::Role::kAccepting ||
                   e->role == EndpointState::Role::kParked ||
                   e->role == EndpointState::Role::kAwaitingConfirm) &&
                  !e->closing;
    }
    const std::string peer = SockaddrToString(from);
    if (unproven >= kMaxUnprovenConnections) {
      close(fd);
      NoteRefusal(peer, absl::StrCat(kMaxUnprovenConnections,
                                     " connections have not completed a handshake"));
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    EndpointState* endpoint = CreateEndpoint(peer, fd);
    endpoint->socket_connected = true;
    WatchSocket(endpoint);
    endpoint->role = EndpointState::Role::kAccepting;
    endpoint->inbox.Expect(HandshakeInbox::Item::kHello);
    const EndpointId id = endpoint->id;
    VLOG(1) << "data plane: connection from " << peer << " (endpoint " << id << ")";
    timers_.emplace(absl::Now() + options_.timeout, [this, id] {
      EndpointState* e = FindEndpoint(id);
      if (e != nullptr && e->role == EndpointState::Role::kAccepting && !e->closing) {
        LOG(WARNING) << "data plane: dropped connection from " << e->peer_address
                     << ": no hello within " << options_.timeout;
        ForceClose(id);
      }
    });
  }
}

void Transport::OnSocketEvent(EndpointId id, uint32_t events) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr || endpoint->socket < 0) return;
  if (!endpoint->socket_connected) {
    if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
    int error = 0;
    socklen_t length = sizeof(error);
    getsockopt(endpoint->socket, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      CloseSocket(endpoint);
      HandleEndpointError(id, absl::UnavailableError(strerror(error)));
      return;
    }
    endpoint->socket_connected = true;
  }
  if ((events & EPOLLOUT) != 0 && !WriteSocket(endpoint)) return;
  if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) ReadSocket(id);
}

void Transport::ReadSocket(EndpointId id) {
  char buffer[kReadyHeaderBytes + kMaxWorkerAddressBytes];
  while (true) {
    EndpointState* endpoint = FindEndpoint(id);
    if (endpoint == nullptr || endpoint->socket < 0) return;
    // Only as much as the expected item needs; one byte when nothing is
    // expected, to see the peer's close (or a byte it must not send).
    const size_t needed = endpoint->inbox.Needed();
    const ssize_t n = read(endpoint->socket, buffer, needed == 0 ? 1 : needed);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    absl::Status error;
    if (n < 0) {
      error = absl::UnavailableError(absl::StrCat("connection lost: ", strerror(errno)));
    } else if (n == 0) {
      error = absl::UnavailableError("the peer closed the connection");
    } else {
      error = endpoint->inbox.Append(absl::string_view(buffer, static_cast<size_t>(n)));
    }
    if (!error.ok()) {
      CloseSocket(endpoint);
      HandleEndpointError(id, error);
      return;
    }
    if (endpoint->inbox.complete()) OnHandshakeItem(id);
  }
}

bool Transport::WriteSocket(EndpointState* endpoint) {
  while (!endpoint->outbox.empty() && endpoint->socket >= 0 && endpoint->socket_connected) {
    const ssize_t n = send(endpoint->socket, endpoint->outbox.data(), endpoint->outbox.size(),
                           MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) {
      const EndpointId id = endpoint->id;
      const absl::Status error =
          absl::UnavailableError(absl::StrCat("connection lost: ", strerror(errno)));
      CloseSocket(endpoint);
      HandleEndpointError(id, error);
      return false;
    }
    endpoint->outbox.erase(0, static_cast<size_t>(n));
  }
  if (endpoint->outbox.empty() && endpoint->close_when_written) {
    ForceClose(endpoint->id);
    return false;
  }
  WatchSocket(endpoint);
  return true;
}

void Transport::QueueHandshake(EndpointState* endpoint, const HelloMessage& message) {
  absl::StatusOr<HelloMessage::Bytes> bytes = message.Serialize();
  if (!bytes.ok()) {
    LOG(WARNING) << "data plane: " << bytes.status();
    return;
  }
  endpoint->outbox.append(bytes->data(), bytes->size());
  WriteSocket(endpoint);
}

void Transport::OnHandshakeItem(EndpointId id) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr) return;
  switch (endpoint->inbox.expecting()) {
    case HandshakeInbox::Item::kHello:
      switch (endpoint->role) {
        case EndpointState::Role::kAccepting:
          OnHelloReceived(id, endpoint->inbox.TakeHello());
          return;
        case EndpointState::Role::kAwaitingConfirm:
          OnConfirmReceived(id, endpoint->inbox.TakeHello());
          return;
        case EndpointState::Role::kConnecting:
          OnReplyReceived(id, endpoint->inbox.TakeHello());
          return;
        default:
          break;
      }
      break;
    case HandshakeInbox::Item::kReadyFrame:
      OnReadyFrame(id, endpoint->inbox.TakeReadyFrame());
      return;
    case HandshakeInbox::Item::kBoundByte:
      if (absl::Status s = endpoint->inbox.TakeBoundByte(); !s.ok()) {
        CloseSocket(endpoint);
        HandleEndpointError(id, s);
        return;
      }
      MarkReady(endpoint);
      return;
    case HandshakeInbox::Item::kNothing:
      break;
  }
  endpoint->inbox.Expect(HandshakeInbox::Item::kNothing);
}

// ---------------------------------------------------------------------------
// Outgoing connections.

void Transport::Connect(const std::string& peer_address, const HelloMessage& hello,
                        ConnectCallback done) {
  // Resolve here, on the caller's thread: name lookups may block.
  absl::StatusOr<HostPort> host_port = ParseHostPort(peer_address);
  absl::StatusOr<ResolvedAddress> addr =
      host_port.ok() ? ResolveAddress(*host_port, /*passive=*/false)
                     : absl::StatusOr<ResolvedAddress>(host_port.status());
  Enqueue([this, peer_address, addr, hello, done = std::move(done)]() mutable {
    if (!addr.ok()) {
      done(0, addr.status());
      return;
    }
    DoConnect(peer_address, addr->storage, addr->length, hello, std::move(done));
  });
}

void Transport::DoConnect(const std::string& peer_address, const sockaddr_storage& addr,
                          socklen_t addr_len, const HelloMessage& hello, ConnectCallback done) {
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    done(0, absl::InternalError(absl::StrCat("connecting to ", peer_address, ": socket: ",
                                             strerror(errno))));
    return;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), addr_len);
  if (rc != 0 && errno != EINPROGRESS) {
    const int error = errno;
    close(fd);
    done(0, absl::UnavailableError(absl::StrCat("connecting to ", peer_address, ": ",
                                                strerror(error))));
    return;
  }
  EndpointState* endpoint = CreateEndpoint(peer_address, fd);
  endpoint->role = EndpointState::Role::kConnecting;
  endpoint->connect_done = std::move(done);
  endpoint->socket_connected = rc == 0;
  endpoint->inbox.Expect(HandshakeInbox::Item::kHello);
  const EndpointId id = endpoint->id;
  // The link must be ready (bound) within the timeout, or it fails.
  timers_.emplace(absl::Now() + options_.timeout, [this, id] {
    EndpointState* e = FindEndpoint(id);
    if (e != nullptr && !e->ready && !e->closing) {
      CloseSocket(e);
      HandleEndpointError(id, absl::DeadlineExceededError(absl::StrCat(
                                  "the handshake did not finish within ",
                                  absl::FormatDuration(options_.timeout))));
    }
  });
  QueueHandshake(endpoint, hello);
}

void Transport::OnReplyReceived(EndpointId id, absl::StatusOr<HelloMessage> reply) {
  EndpointState* e = FindEndpoint(id);
  if (e == nullptr || e->role != EndpointState::Role::kConnecting) return;
  if (reply.ok() && reply->type == HelloType::kHello) {
    reply = absl::InvalidArgumentError("peer answered with a hello instead of accept/reject");
  }
  if (!reply.ok()) {
    CloseSocket(e);
    HandleEndpointError(id, reply.status());
    return;
  }
  e->role = EndpointState::Role::kOwned;
  // After an accept the acceptor's ready frame follows our confirmation.
  e->inbox.Expect(reply->type == HelloType::kAccept ? HandshakeInbox::Item::kReadyFrame
                                                    : HandshakeInbox::Item::kNothing);
  ConnectCallback cb = std::move(e->connect_done);
  cb(id, std::move(reply));
}

void Transport::OnReadyFrame(EndpointId id, absl::StatusOr<ReadyFrame> frame) {
  EndpointState* e = FindEndpoint(id);
  if (e == nullptr || e->closing) return;
  if (!frame.ok()) {
    CloseSocket(e);
    HandleEndpointError(id, frame.status());
    return;
  }
  // Each side sends its address only after the proofs: the acceptor once
  // our confirmation verified, we with that confirmation (sent only after
  // the acceptor's proof verified); the acceptor reads ours only after it
  // adopted the connection.
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(frame->worker_address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Transport::OnEndpointError;
  params.err_handler.arg = &e->error_arg;
  if (ucs_status_t s = ucp_ep_create(worker_, &params, &e->ep); s != UCS_OK) {
    e->ep = nullptr;
    CloseSocket(e);
    HandleEndpointError(id, UcxError(s, absl::StrCat("connecting to ", e->peer_address)));
    return;
  }
  endpoint_by_ep_[e->ep] = id;
  if (getenv("CORESCAPE_UCX_PRINT_EP") != nullptr) {
    // Which UCX transports carry this endpoint's lanes (diagnostics).
    ucp_ep_print_info(e->ep, stderr);
  }
  // The peer's bind token, first on the endpoint: the peer learns which
  // handshake connection the endpoint belongs to, and says so.
  ucp_request_param_t param{};
  PendingUcxOp* op = NewUcxOp([](ucs_status_t, size_t) {}, param);
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_AM_SEND_FLAG_REPLY;
  auto token = std::make_shared<std::string>(frame->bind_token);
  op->done = [token](ucs_status_t, size_t) {};  // keeps the header until sent
  TrackUcxOp(ucp_am_send_nbx(e->ep, kBindMessageAmId, token->data(), token->size(), nullptr, 0,
                             &param),
             op);
  e->inbox.Expect(HandshakeInbox::Item::kBoundByte);
}

void Transport::MarkReady(EndpointState* endpoint) {
  endpoint->ready = true;
  std::vector<EndpointState::HeldSend> held = std::move(endpoint->held_sends);
  endpoint->held_sends.clear();
  const EndpointId id = endpoint->id;
  for (EndpointState::HeldSend& send : held) {
    DoSend(send.request, id, send.tag, send.data, send.bytes);
  }
}

// ---------------------------------------------------------------------------
// Incoming connections.

void Transport::SendReadyFrame(EndpointState* endpoint) {
  absl::StatusOr<std::string> token = SecureRandomBytes(kBindTokenBytes);
  absl::StatusOr<std::string> frame =
      token.ok() ? EncodeReadyFrame({.bind_token = *token, .worker_address = worker_address_})
                 : absl::StatusOr<std::string>(token.status());
  if (!frame.ok()) {
    const EndpointId id = endpoint->id;
    CloseSocket(endpoint);
    HandleEndpointError(id, frame.status());
    return;
  }
  endpoint->bind_token = *token;
  pending_binds_[*token] = endpoint->id;
  endpoint->outbox += *frame;
  WriteSocket(endpoint);
}

ucs_status_t Transport::OnBindMessage(void* arg, const void* header, size_t header_length,
                                      void*, size_t, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Transport*>(arg);
  const ucp_ep_h reply_ep =
      (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : nullptr;
  if (header_length != kBindTokenBytes || reply_ep == nullptr) {
    self->NoteDrop(DropReason::kMalformed,
                   [&] { return absl::StrCat("a bind message with a ", header_length,
                                             "-byte header"); });
    return UCS_OK;
  }
  self->HandleBind(std::string(static_cast<const char*>(header), header_length), reply_ep);
  return UCS_OK;
}

void Transport::HandleBind(const std::string& token, ucp_ep_h reply_ep) {
  auto it = pending_binds_.find(token);
  EndpointState* endpoint = it == pending_binds_.end() ? nullptr : FindEndpoint(it->second);
  auto mapped = endpoint_by_ep_.find(reply_ep);
  if (endpoint == nullptr || endpoint->closing || endpoint->reply_ep != nullptr ||
      (mapped != endpoint_by_ep_.end() && mapped->second != it->second)) {
    NoteDrop(DropReason::kUnauthenticated, [] { return std::string("a bind message with an unknown token"); });
    return;
  }
  pending_binds_.erase(it);
  endpoint->reply_ep = reply_ep;
  endpoint_by_ep_[reply_ep] = endpoint->id;
  endpoint->outbox.push_back(kBoundByte);
  WriteSocket(endpoint);
}

void Transport::NoteRefusal(const std::string& peer, const std::string& why) {
  ++refusals_since_log_;
  const absl::Time now = absl::Now();
  if (now - last_refusal_log_ < kRefusalLogInterval) return;
  LOG(WARNING) << "data plane: turned away " << refusals_since_log_
               << " connection(s) since the last such line; latest from " << peer << ": " << why;
  last_refusal_log_ = now;
  refusals_since_log_ = 0;
}

void Transport::OnHelloReceived(EndpointId id, absl::StatusOr<HelloMessage> hello) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr || endpoint->closing ||
      endpoint->role != EndpointState::Role::kAccepting) {
    return;
  }
  if (!hello.ok() || hello->type != HelloType::kHello) {
    // A scanner's connections: one line a second at most, however many.
    NoteRefusal(endpoint->peer_address, hello.ok() ? "its first message is not a hello"
                                                   : std::string(hello.status().message()));
    ForceClose(id);
    return;
  }
  DispatchHello(id, *hello);
}

void Transport::DispatchHello(EndpointId id, const HelloMessage& hello) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr || endpoint->closing) return;
  HelloHandler* handler = nullptr;
  uint64_t newest_generation = 0;
  bool job_known = false;
  {
    absl::MutexLock lock(&handlers_mu_);
    auto it = handlers_.find({hello.job_id, hello.generation});
    if (it != handlers_.end()) handler = it->second;
    for (const auto& [key, h] : handlers_) {
      if (key.first != hello.job_id) continue;
      job_known = true;
      newest_generation = std::max(newest_generation, key.second);
    }
  }
  if (handler != nullptr) {
    // Unregistering runs on this thread, so the handler stays alive here.
    HelloHandler::Verdict verdict = handler->OnHello(id, endpoint->peer_address, hello);
    if (!verdict.accept) {
      RejectEndpoint(id, hello, verdict.reply.reason);
      return;
    }
    endpoint->role = EndpointState::Role::kAwaitingConfirm;
    endpoint->handler_key = {hello.job_id, hello.generation};
    endpoint->inbox.Expect(HandshakeInbox::Item::kHello);  // the confirmation
    QueueHandshake(endpoint, verdict.reply);
    timers_.emplace(absl::Now() + options_.timeout, [this, id] {
      OnConfirmReceived(id, absl::DeadlineExceededError(absl::StrCat(
                                "no confirmation within ", absl::FormatDuration(options_.timeout))));
    });
    return;
  }
  if (job_known && newest_generation > hello.generation) {
    RejectEndpoint(id, hello,
                   absl::StrCat("stale generation ", hello.generation,
                                ": this process is at generation ", newest_generation));
    return;
  }
  // The communicator it names may not exist here yet: hold the connection.
  endpoint->role = EndpointState::Role::kParked;
  const absl::Time deadline = absl::Now() + options_.timeout;
  parked_.push_back({id, hello, deadline});
  timers_.emplace(deadline, [this] { ExpireParkedHellos(); });
}

void Transport::OnConfirmReceived(EndpointId id, absl::StatusOr<HelloMessage> confirm) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr || endpoint->closing ||
      endpoint->role != EndpointState::Role::kAwaitingConfirm) {
    return;
  }
  HelloHandler* handler = nullptr;
  {
    absl::MutexLock lock(&handlers_mu_);
    auto it = handlers_.find(endpoint->handler_key);
    if (it != handlers_.end()) handler = it->second;
  }
  // Unregistering runs on this thread, so the handler stays alive here.
  if (handler != nullptr &&
      handler->OnConfirm(id, endpoint->peer_address, std::move(confirm))) {
    endpoint = FindEndpoint(id);
    if (endpoint == nullptr) return;
    endpoint->role = EndpointState::Role::kOwned;
    endpoint->inbox.Expect(HandshakeInbox::Item::kReadyFrame);  // the dialer's
    SendReadyFrame(endpoint);
    // The link is ready once both endpoints are bound; until then it may
    // fail only through the handshake connection.
    timers_.emplace(absl::Now() + options_.timeout, [this, id] {
      EndpointState* e = FindEndpoint(id);
      if (e != nullptr && !e->ready && !e->closing) {
        CloseSocket(e);
        HandleEndpointError(id, absl::DeadlineExceededError(absl::StrCat(
                                    "the dialer's endpoint did not bind within ",
                                    absl::FormatDuration(options_.timeout))));
      }
    });
    return;
  }
  ForceClose(id);
}

void Transport::SendHandshake(EndpointId id, const HelloMessage& message) {
  Enqueue([this, id, message] {
    EndpointState* endpoint = FindEndpoint(id);
    if (endpoint == nullptr || endpoint->closing) return;
    // A failure here surfaces as an endpoint error to the owner.
    QueueHandshake(endpoint, message);
    // With our proof, our worker address (the acceptor reads it only if
    // the proof verifies).
    if (message.type == HelloType::kConfirm) SendReadyFrame(endpoint);
  });
}

void Transport::RejectEndpoint(EndpointId id, const HelloMessage& hello,
                               const std::string& reason) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr) return;
  LOG(WARNING) << "data plane: rejected connection from " << endpoint->peer_address
               << " claiming " << DescribeHello(hello) << ": " << reason;
  HelloMessage reply;
  reply.type = HelloType::kReject;
  reply.generation = hello.generation;
  reply.world_size = 1;
  reply.job_id = hello.job_id.size() <= kMaxJobIdBytes ? hello.job_id : "";
  reply.reason = reason;
  endpoint->role = EndpointState::Role::kOwned;
  endpoint->inbox.Expect(HandshakeInbox::Item::kNothing);
  QueueHandshake(endpoint, reply);
  DoClose(id, /*flush_first=*/true);
}

void Transport::ExpireParkedHellos() {
  const absl::Time now = absl::Now();
  std::vector<ParkedHello> keep;
  std::vector<ParkedHello> expired;
  for (ParkedHello& p : parked_) (p.deadline <= now ? expired : keep).push_back(std::move(p));
  parked_ = std::move(keep);
  for (const ParkedHello& p : expired) {
    RejectEndpoint(p.id, p.hello,
                   absl::StrCat("no communicator for job '", wire::Printable(p.hello.job_id),
                                "' generation ", p.hello.generation, " on this process"));
  }
}

absl::Status Transport::RegisterHelloHandler(const std::string& job_id, uint64_t generation,
                                             HelloHandler* handler) {
  {
    absl::MutexLock lock(&handlers_mu_);
    if (!handlers_.emplace(std::make_pair(job_id, generation), handler).second) {
      return absl::AlreadyExistsError(absl::StrCat(
          "a communicator for job '", job_id, "' generation ", generation,
          " already exists on this transport"));
    }
  }
  // Hand over connections that arrived first; turn away older generations.
  Enqueue([this, job_id, generation] {
    std::vector<ParkedHello> keep;
    std::vector<ParkedHello> now_routable;
    for (ParkedHello& p : parked_) {
      bool same_job = p.hello.job_id == job_id;
      (same_job && p.hello.generation <= generation ? now_routable : keep).push_back(std::move(p));
    }
    parked_ = std::move(keep);
    for (const ParkedHello& p : now_routable) {
      EndpointState* e = FindEndpoint(p.id);
      if (e == nullptr || e->closing) continue;
      e->role = EndpointState::Role::kAccepting;
      DispatchHello(p.id, p.hello);
    }
  });
  return absl::OkStatus();
}

void Transport::UnregisterHelloHandler(const std::string& job_id, uint64_t generation) {
  RunAndWait([&] {
    absl::MutexLock lock(&handlers_mu_);
    handlers_.erase({job_id, generation});
  });
}

// ---------------------------------------------------------------------------
// Errors and closing.

void Transport::OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* error_arg = static_cast<EndpointState::ErrorArg*>(arg);
  Transport* self = error_arg->transport;
  const EndpointId id = error_arg->id;
  self->Enqueue([self, id, status] { self->HandleEndpointError(id, UcxError(status, "UCX")); });
}

void Transport::HandleEndpointError(EndpointId id, absl::Status cause) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr || endpoint->failed) return;
  endpoint->failed = true;
  if (endpoint->closing) {
    // A close waiting for its writes: nothing more will be written.
    if (endpoint->close_when_written) ForceClose(id);
    return;
  }
  absl::Status error(cause.code() == absl::StatusCode::kOk ? absl::StatusCode::kUnavailable
                                                           : cause.code(),
                     absl::StrCat("connection to ", endpoint->peer_address, ": ",
                                  cause.message()));
  switch (endpoint->role) {
    case EndpointState::Role::kConnecting: {
      ConnectCallback cb = std::move(endpoint->connect_done);
      ForceClose(id);
      if (cb) cb(0, error);
      return;
    }
    case EndpointState::Role::kAwaitingConfirm:
      OnConfirmReceived(id, error);
      return;
    case EndpointState::Role::kAccepting:
    case EndpointState::Role::kParked:
      VLOG(1) << "data plane: " << error.message();
      std::erase_if(parked_, [id](const ParkedHello& p) { return p.id == id; });
      ForceClose(id);
      return;
    case EndpointState::Role::kOwned:
      // Without a handler yet, SetErrorHandler reports the failure later.
      if (endpoint->on_error) endpoint->on_error(error);
      return;
  }
}

void Transport::Close(EndpointId endpoint, bool flush_first) {
  Enqueue([this, endpoint, flush_first] { DoClose(endpoint, flush_first); });
}

void Transport::DoClose(EndpointId id, bool flush_first) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr || endpoint->closing) return;
  endpoint->closing = true;
  endpoint->on_error = nullptr;
  if (!flush_first || endpoint->failed) {
    ForceClose(id);
    return;
  }
  if (endpoint->ep == nullptr) {
    // Only the handshake connection: close once its last message is written.
    if (endpoint->outbox.empty() || endpoint->socket < 0) {
      ForceClose(id);
      return;
    }
    endpoint->close_when_written = true;
    timers_.emplace(absl::Now() + kFlushCloseDeadline, [this, id] { ForceClose(id); });
    return;
  }
  ucp_request_param_t param{};
  PendingUcxOp* op = NewUcxOp([this, id](ucs_status_t, size_t) { ForceClose(id); }, param);
  TrackUcxOp(ucp_ep_flush_nbx(endpoint->ep, &param), op);
  timers_.emplace(absl::Now() + kFlushCloseDeadline, [this, id] { ForceClose(id); });
}

void Transport::ForceClose(EndpointId id) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr || endpoint->close_started) return;
  endpoint->closing = true;
  endpoint->close_started = true;
  endpoint->on_error = nullptr;
  std::erase_if(parked_, [id](const ParkedHello& p) { return p.id == id; });
  CloseSocket(endpoint);
  if (!endpoint->bind_token.empty()) pending_binds_.erase(endpoint->bind_token);
  std::vector<EndpointState::HeldSend> held = std::move(endpoint->held_sends);
  endpoint->held_sends.clear();
  for (EndpointState::HeldSend& send : held) {
    FinishRequest(send.request.get(), absl::CancelledError("endpoint closed"), 0);
  }
  endpoint = FindEndpoint(id);
  if (endpoint == nullptr) return;
  if (endpoint->ep == nullptr) {
    EraseEndpoint(id);
    return;
  }
  ucp_request_param_t param{};
  PendingUcxOp* op = NewUcxOp([this, id](ucs_status_t, size_t) { EraseEndpoint(id); }, param);
  param.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  TrackUcxOp(ucp_ep_close_nbx(endpoint->ep, &param), op);
}

}  // namespace corescape::comm
