// Transport: endpoints. Outgoing connections (sockaddr connect, hello,
// reply), incoming ones (listener, hello, routing to the communicator that
// registered for its job and generation, parking until it does, rejection
// of strangers and stale generations), endpoint errors, and closing.
#include <arpa/inet.h>
#include <netdb.h>

#include <cstring>

#include <ucp/api/ucp.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/comm/transport.h"
#include "runtime/comm/transport_internal.h"
#include "runtime/comm/ucx_status.h"
#include "runtime/comm/wire_codec.h"

namespace corescape::comm {
namespace {

// A flushed close that has not finished by then is forced.
constexpr absl::Duration kFlushCloseDeadline = absl::Seconds(2);

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

Transport::EndpointState* Transport::CreateEndpoint(const std::string& peer_address) {
  auto state = std::make_unique<EndpointState>();
  state->id = next_endpoint_id_++;
  state->peer_address = peer_address;
  state->error_arg = {this, state->id};
  EndpointState* raw = state.get();
  endpoints_[raw->id] = std::move(state);
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
    for (ArrivedMessage& m : endpoint->quarantine) Release(m);
    if (endpoint->ep != nullptr) endpoint_by_ep_.erase(endpoint->ep);
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
// UCX operations other than tagged messages.

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

void Transport::OnStreamRecvComplete(void* ucx_request, ucs_status_t status, size_t length,
                                     void* user_data) {
  auto* op = static_cast<PendingUcxOp*>(user_data);
  ucp_request_free(ucx_request);
  op->completed = true;
  op->transport->pending_ops_.erase(op);
  op->transport->Enqueue([op, status, length] { op->transport->FinishUcxOp(op, status, length); });
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
  // done() may read op->buffer, so op is freed after it.
  op->done(status, length);
  delete op;
}

void Transport::StartStreamSend(EndpointState* endpoint, const HelloMessage& message,
                                std::function<void(absl::Status)> done) {
  absl::StatusOr<HelloMessage::Bytes> bytes = message.Serialize();
  if (!bytes.ok()) {
    done(bytes.status());
    return;
  }
  ucp_request_param_t param{};
  PendingUcxOp* op = NewUcxOp(
      [done = std::move(done)](ucs_status_t status, size_t) {
        done(UcxError(status, "sending handshake"));
      },
      param);
  op->buffer = *bytes;
  op->length = kHelloBytes;
  TrackUcxOp(ucp_stream_send_nbx(endpoint->ep, op->buffer.data(), kHelloBytes, &param), op);
}

void Transport::StartStreamRecv(EndpointState* endpoint,
                                std::function<void(absl::StatusOr<HelloMessage>)> done) {
  auto* op = new PendingUcxOp;
  op->transport = this;
  op->done = [op, done = std::move(done)](ucs_status_t status, size_t length) {
    if (status != UCS_OK) {
      done(UcxError(status, "receiving handshake"));
      return;
    }
    done(HelloMessage::Parse(absl::string_view(op->buffer.data(), length)));
  };
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_STREAM_RECV_FLAG_WAITALL;
  param.cb.recv_stream = &Transport::OnStreamRecvComplete;
  param.user_data = op;
  size_t length = 0;
  ucs_status_ptr_t r =
      ucp_stream_recv_nbx(endpoint->ep, op->buffer.data(), kHelloBytes, &length, &param);
  op->length = length;
  TrackUcxOp(r, op);
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
  EndpointState* endpoint = CreateEndpoint(peer_address);
  endpoint->role = EndpointState::Role::kConnecting;
  endpoint->connect_done = std::move(done);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  params.sockaddr.addrlen = addr_len;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Transport::OnEndpointError;
  params.err_handler.arg = &endpoint->error_arg;
  const EndpointId id = endpoint->id;
  if (ucs_status_t s = ucp_ep_create(worker_, &params, &endpoint->ep); s != UCS_OK) {
    ConnectCallback cb = std::move(endpoint->connect_done);
    EraseEndpoint(id);
    cb(0, UcxError(s, absl::StrCat("connecting to ", peer_address)));
    return;
  }
  endpoint_by_ep_[endpoint->ep] = id;
  auto fail = [this, id](absl::Status status) {
    EndpointState* e = FindEndpoint(id);
    if (e == nullptr || e->role != EndpointState::Role::kConnecting) return;
    ConnectCallback cb = std::move(e->connect_done);
    const std::string peer = e->peer_address;
    ForceClose(id);
    cb(0, absl::Status(status.code(), absl::StrCat("connecting to ", peer, ": ",
                                                   status.message())));
  };
  StartStreamSend(endpoint, hello, [fail](absl::Status s) {
    if (!s.ok()) fail(s);
  });
  endpoint = FindEndpoint(id);  // the send may have failed at once
  if (endpoint == nullptr || endpoint->closing) return;
  StartStreamRecv(endpoint, [this, id, fail](absl::StatusOr<HelloMessage> reply) {
    if (!reply.ok()) {
      fail(reply.status());
      return;
    }
    EndpointState* e = FindEndpoint(id);
    if (e == nullptr || e->role != EndpointState::Role::kConnecting) return;
    if (reply->type == HelloType::kHello) {
      fail(absl::InvalidArgumentError("peer answered with a hello instead of accept/reject"));
      return;
    }
    e->role = EndpointState::Role::kOwned;
    if (getenv("CORESCAPE_UCX_PRINT_EP") != nullptr) {
      // Which UCX transports carry this endpoint's lanes (diagnostics).
      ucp_ep_print_info(e->ep, stderr);
    }
    ConnectCallback cb = std::move(e->connect_done);
    cb(id, std::move(reply));
  });
}

// ---------------------------------------------------------------------------
// Incoming connections.

void Transport::OnConnectionRequest(ucp_conn_request_h request, void* arg) {
  auto* self = static_cast<Transport*>(arg);
  self->Enqueue([self, request] { self->HandleConnectionRequest(request); });
}

void Transport::HandleConnectionRequest(ucp_conn_request_h request) {
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  std::string from = "unknown address";
  if (ucp_conn_request_query(request, &attr) == UCS_OK) {
    from = SockaddrToString(attr.client_address);
  }
  EndpointState* endpoint = CreateEndpoint(from);
  endpoint->role = EndpointState::Role::kAccepting;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Transport::OnEndpointError;
  params.err_handler.arg = &endpoint->error_arg;
  const EndpointId id = endpoint->id;
  if (ucs_status_t s = ucp_ep_create(worker_, &params, &endpoint->ep); s != UCS_OK) {
    // (ucp_ep_create consumed the request even though it failed: it must not
    // be rejected too.)
    LOG(WARNING) << "data plane: cannot accept connection from " << from << ": "
                 << ucs_status_string(s);
    EraseEndpoint(id);
    return;
  }
  endpoint_by_ep_[endpoint->ep] = id;
  VLOG(1) << "data plane: connection from " << from << " (endpoint " << id << ")";
  StartStreamRecv(endpoint, [this, id](absl::StatusOr<HelloMessage> hello) {
    OnHelloReceived(id, std::move(hello));
  });
  timers_.emplace(absl::Now() + options_.timeout, [this, id] {
    EndpointState* e = FindEndpoint(id);
    if (e != nullptr && e->role == EndpointState::Role::kAccepting && !e->closing) {
      LOG(WARNING) << "data plane: dropped connection from " << e->peer_address
                   << ": no hello within " << options_.timeout;
      ForceClose(id);
    }
  });
}

void Transport::OnHelloReceived(EndpointId id, absl::StatusOr<HelloMessage> hello) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr || endpoint->closing ||
      endpoint->role != EndpointState::Role::kAccepting) {
    return;
  }
  if (!hello.ok()) {
    if (!endpoint->failed) {
      LOG(WARNING) << "data plane: dropped connection from " << endpoint->peer_address << ": "
                   << hello.status().message();
    }
    ForceClose(id);
    return;
  }
  if (hello->type != HelloType::kHello) {
    LOG(WARNING) << "data plane: dropped connection from " << endpoint->peer_address
                 << ": first message is not a hello";
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
    StartStreamSend(endpoint, verdict.reply, [this, id](absl::Status s) {
      if (!s.ok()) OnConfirmReceived(id, s);
    });
    endpoint = FindEndpoint(id);  // the send may have failed at once
    if (endpoint == nullptr || endpoint->closing) return;
    StartStreamRecv(endpoint, [this, id](absl::StatusOr<HelloMessage> confirm) {
      OnConfirmReceived(id, std::move(confirm));
    });
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
    // What the dialer sent after its confirmation: delivered now that the
    // handler adopted (and authorized) the endpoint.
    SettleQuarantine(endpoint);
    return;
  }
  ForceClose(id);
}

void Transport::SendHandshake(EndpointId id, const HelloMessage& message) {
  Enqueue([this, id, message] {
    EndpointState* endpoint = FindEndpoint(id);
    if (endpoint == nullptr || endpoint->closing) return;
    StartStreamSend(endpoint, message, [](absl::Status s) {
      // A failure here surfaces as an endpoint error to the owner.
      LOG_IF(WARNING, !s.ok()) << "data plane: " << s.message();
    });
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
  StartStreamSend(endpoint, reply, [this, id](absl::Status) { DoClose(id, /*flush_first=*/true); });
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
  self->Enqueue([self, id, status] { self->HandleEndpointError(id, status); });
}

void Transport::HandleEndpointError(EndpointId id, ucs_status_t status) {
  EndpointState* endpoint = FindEndpoint(id);
  if (endpoint == nullptr || endpoint->failed) return;
  endpoint->failed = true;
  if (endpoint->closing) return;
  absl::Status error = UcxError(status, absl::StrCat("connection to ", endpoint->peer_address));
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
  if (!flush_first || endpoint->failed || endpoint->ep == nullptr) {
    ForceClose(id);
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
  SettleQuarantine(endpoint);  // closing: drops what it held
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
