// Transport: data messages. Sends are UCP active messages with a (tag, link
// token) header and the sender's reply endpoint; arrivals are checked
// against the endpoint they came on (adopted after a handshake, for the key
// and sender rank the tag claims, with the link's token) and matched to
// posted receives by tag, or held until one is posted.
#include <cstring>

#include <ucp/api/ucp.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/comm/message_tag.h"
#include "runtime/comm/transport.h"
#include "runtime/comm/transport_internal.h"
#include "runtime/comm/ucx_status.h"
#include "runtime/comm/wire_codec.h"

namespace corescape::comm {
namespace {

// At most one summary line per interval, however many messages are dropped.
constexpr absl::Duration kDropLogInterval = absl::Seconds(1);
// Tagged messages dropped per DropTaggedMessages call (the rest wait for
// the next one, a progress round later).
constexpr int kMaxTaggedDropsPerCall = 1024;

}  // namespace

std::shared_ptr<MessageRequest> Transport::Send(EndpointId to, uint64_t tag, const void* data,
                                                int64_t bytes, CompletionCallback on_complete) {
  auto request = std::make_shared<MessageRequest>(/*is_receive=*/false, tag, bytes);
  request->on_complete_ = std::move(on_complete);
  Enqueue([this, request, to, tag, data, bytes] { DoSend(request, to, tag, data, bytes); });
  return request;
}

std::shared_ptr<MessageRequest> Transport::Recv(uint64_t tag, void* data, int64_t capacity,
                                                CompletionCallback on_complete) {
  auto request = std::make_shared<MessageRequest>(/*is_receive=*/true, tag, capacity);
  request->on_complete_ = std::move(on_complete);
  Enqueue([this, request, tag, data, capacity] { DoRecv(request, tag, data, capacity); });
  return request;
}

void Transport::Cancel(std::shared_ptr<MessageRequest> request) {
  Enqueue([this, request = std::move(request)] {
    if (request->posted_) {
      auto it = posted_.find(request->tag());
      if (it != posted_.end()) {
        std::erase(it->second, request);
        if (it->second.empty()) posted_.erase(it);
      }
      request->posted_ = false;
      FinishRequest(request.get(), absl::CancelledError("receive cancelled"), 0);
    } else if (request->ucx_request_ != nullptr && request->is_receive()) {
      // Matched and fetching rendezvous data: UCX finishes or fails it.
      ucp_request_cancel(worker_, request->ucx_request_);
    }
  });
}

void Transport::AuthorizeEndpoint(EndpointId endpoint,
                                  const EndpointAuthorization& authorization) {
  auto apply = [this, endpoint, authorization] {
    if (EndpointState* state = FindEndpoint(endpoint); state != nullptr) {
      state->authorization = authorization;
    }
  };
  // Inline on the progress thread (where handshakes end), so nothing that
  // arrives after the adoption is judged before it.
  if (HoldsUcxLock()) {
    apply();
  } else {
    Enqueue(std::move(apply));
  }
}

void Transport::DiscardUnreceived(uint16_t key) {
  Enqueue([this, key] {
    size_t discarded = 0;
    for (auto it = unexpected_.begin(); it != unexpected_.end();) {
      auto next = std::next(it);
      if (static_cast<uint16_t>(it->first >> 48) == key) {
        for (ArrivedMessage& m : it->second) {
          --unexpected_count_;
          unexpected_bytes_ -= m.held_bytes();
          Release(m);
          ++discarded;
        }
        unexpected_.erase(it);
      }
      it = next;
    }
    VLOG_IF(1, discarded > 0) << "data plane: discarded " << discarded
                              << " unreceived message(s) of a closed communicator";
  });
}

DroppedMessageCounts Transport::dropped_messages() const {
  DroppedMessageCounts counts;
  for (size_t i = 0; i < kDropReasonCount; ++i) counts.by_reason[i] = dropped_[i].load();
  return counts;
}

void Transport::NoteDrop(DropReason reason, absl::FunctionRef<std::string()> detail) {
  dropped_[static_cast<size_t>(reason)].fetch_add(1);
  ++drops_since_log_;
  const absl::Time now = absl::Now();
  if (now - last_drop_log_ < kDropLogInterval) return;
  const DroppedMessageCounts totals = dropped_messages();
  std::string totals_text;
  for (const DropReasonText& text : kDropReasons) {
    absl::StrAppend(&totals_text, totals_text.empty() ? "" : ", ", text.log_total, " ",
                    totals.count(text.reason));
  }
  LOG(WARNING) << "data plane: dropped " << drops_since_log_ << " message(s) since "
               << (last_drop_log_ == absl::InfinitePast()
                       ? std::string("start")
                       : absl::StrCat(absl::FormatDuration(now - last_drop_log_), " ago"))
               << "; latest: " << DropReasonTextOf(reason).log_latest << ", " << detail()
               << " (totals: " << totals_text << ")";
  last_drop_log_ = now;
  drops_since_log_ = 0;
}

// ---------------------------------------------------------------------------
// Sending and posting receives.

void Transport::DoSend(const std::shared_ptr<MessageRequest>& request, EndpointId to,
                       uint64_t tag, const void* data, int64_t bytes) {
  EndpointState* endpoint = FindEndpoint(to);
  if (endpoint == nullptr || endpoint->closing || endpoint->failed) {
    FinishRequest(request.get(),
                  absl::UnavailableError(absl::StrCat("endpoint ", to, " is ",
                                                      endpoint == nullptr ? "closed" : "failed")),
                  0);
    return;
  }
  if (!endpoint->authorization.has_value()) {
    FinishRequest(request.get(),
                  absl::FailedPreconditionError(absl::StrCat(
                      "endpoint ", to, " to ", endpoint->peer_address,
                      " has not completed the handshake")),
                  0);
    return;
  }
  if (!endpoint->ready) {
    // Adopted, but the dialer's UCP endpoint is not bound yet: sent once it is.
    endpoint->held_sends.push_back({request, tag, data, bytes});
    return;
  }
  wire::PutU64(request->wire_header_, tag);
  wire::PutU64(request->wire_header_ + 8, endpoint->authorization->link_token);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
  // The receiver learns which endpoint a message came on from the reply
  // endpoint, and accepts it only from one it adopted.
  param.flags = UCP_AM_SEND_FLAG_REPLY;
  param.cb.send = &Transport::OnSendComplete;
  param.user_data = request.get();
  param.datatype = ucp_dt_make_contig(1);
  request->owner_ = this;
  ucs_status_ptr_t r = ucp_am_send_nbx(endpoint->ep, kDataMessageAmId, request->wire_header_,
                                       kDataHeaderBytes, data, bytes, &param);
  if (r == nullptr) {
    FinishRequest(request.get(), absl::OkStatus(), bytes);
  } else if (UCS_PTR_IS_ERR(r)) {
    FinishRequest(request.get(), UcxError(UCS_PTR_STATUS(r), "send"), 0);
  } else if (!request->ucx_completed_) {
    request->ucx_request_ = r;
    in_flight_[request.get()] = request;
  }
}

void Transport::DoRecv(const std::shared_ptr<MessageRequest>& request, uint64_t tag, void* data,
                       int64_t capacity) {
  request->owner_ = this;
  request->receive_buffer_ = data;
  auto it = unexpected_.find(tag);
  if (it == unexpected_.end()) {
    posted_[tag].push_back(request);
    request->posted_ = true;
    return;
  }
  ArrivedMessage message = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) unexpected_.erase(it);
  --unexpected_count_;
  unexpected_bytes_ -= message.held_bytes();
  Complete(request, message, message.payload());
}

// ---------------------------------------------------------------------------
// Arrivals.

ucs_status_t Transport::OnDataMessage(void* arg, const void* header, size_t header_length,
                                      void* data, size_t length,
                                      const ucp_am_recv_param_t* param) {
  return static_cast<Transport*>(arg)->HandleDataMessage(header, header_length, data, length,
                                                         *param);
}

ucs_status_t Transport::HandleDataMessage(const void* header, size_t header_length, void* data,
                                          size_t length, const ucp_am_recv_param_t& param) {
  // Returning UCS_OK without keeping the data drops the message; for a
  // rendezvous one UCX releases its descriptor and tells the sender.
  if (header_length != kDataHeaderBytes) {
    NoteDrop(DropReason::kMalformed, [&] { return std::string(absl::StrCat(header_length, "-byte header")); });
    return UCS_OK;
  }
  ArrivedMessage message;
  message.tag = wire::GetU64(static_cast<const char*>(header));
  message.link_token = wire::GetU64(static_cast<const char*>(header) + 8);
  message.length = length;
  message.rendezvous = (param.recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;

  const ucp_ep_h reply_ep =
      (param.recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param.reply_ep : nullptr;
  auto found = reply_ep == nullptr ? endpoint_by_ep_.end() : endpoint_by_ep_.find(reply_ep);
  EndpointState* endpoint =
      found == endpoint_by_ep_.end() ? nullptr : FindEndpoint(found->second);
  if (endpoint == nullptr || endpoint->closing || endpoint->failed) {
    NoteDrop(DropReason::kUnauthenticated, [&] { return std::string(absl::StrCat(reply_ep == nullptr ? "no reply endpoint" : "unknown or closed endpoint",
                          ", ", TagDebugString(message.tag))); });
    return UCS_OK;
  }
  message.from = endpoint->id;
  // (An endpoint is bound only after its communicator adopted and
  // authorized it, so this is a closed or abandoned one.)
  if (!endpoint->authorization.has_value()) {
    NoteDrop(DropReason::kUnauthenticated, [&] { return std::string(absl::StrCat("from ", endpoint->peer_address, " before a completed handshake, ",
                          TagDebugString(message.tag))); });
    return UCS_OK;
  }
  if (!Authorized(*endpoint, message)) {
    NoteDrop(DropReason::kForged, [&] { return std::string(absl::StrCat("from ", endpoint->peer_address, " (adopted as rank ",
                          endpoint->authorization->source_rank, "), ",
                          TagDebugString(message.tag))); });
    return UCS_OK;
  }
  return Deliver(std::move(message), data, &param);
}

bool Transport::Authorized(const EndpointState& endpoint, const ArrivedMessage& message) const {
  const EndpointAuthorization& allowed = *endpoint.authorization;
  if (message.link_token != allowed.link_token) return false;
  absl::StatusOr<DecodedTag> tag = DecodeTag(message.tag);
  return tag.ok() && tag->key == allowed.key && tag->source_rank == allowed.source_rank;
}

ucs_status_t Transport::Deliver(ArrivedMessage message, void* data,
                                const ucp_am_recv_param_t* param) {
  const void* payload = param != nullptr ? data : message.payload();
  if (auto it = posted_.find(message.tag); it != posted_.end()) {
    std::shared_ptr<MessageRequest> request = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) posted_.erase(it);
    request->posted_ = false;
    // Inside the callback a rendezvous fetch may start at once (UCX then
    // owns the descriptor) and eager data is copied out: nothing is kept.
    Complete(request, message, payload);
    return UCS_OK;
  }
  if (unexpected_count_ >= kMaxUnexpectedMessages ||
      unexpected_bytes_ + message.held_bytes() > kMaxUnexpectedBytes) {
    NoteDrop(DropReason::kOverLimit, [&] { return std::string(absl::StrCat(unexpected_count_, " messages (", unexpected_bytes_,
                          " bytes) already waiting for receives, ",
                          TagDebugString(message.tag))); });
    Release(message);
    return UCS_OK;
  }
  const ucs_status_t status = param != nullptr ? Retain(message, data, *param) : UCS_OK;
  ++unexpected_count_;
  unexpected_bytes_ += message.held_bytes();
  unexpected_[message.tag].push_back(std::move(message));
  return status;
}

ucs_status_t Transport::Retain(ArrivedMessage& message, void* data,
                               const ucp_am_recv_param_t& param) {
  if (message.rendezvous || (param.recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0) {
    message.held = data;
    return UCS_INPROGRESS;
  }
  message.copy = std::make_unique<char[]>(message.length);
  if (message.length > 0) std::memcpy(message.copy.get(), data, message.length);
  return UCS_OK;
}

void Transport::Complete(const std::shared_ptr<MessageRequest>& request,
                         ArrivedMessage& message, const void* payload) {
  const auto capacity = static_cast<size_t>(request->requested_bytes());
  if (message.length > capacity) {
    Release(message);
    FinishRequest(request.get(),
                  absl::DataLossError(absl::StrCat("receive: a message of ", message.length,
                                                   " bytes for a buffer of ", capacity,
                                                   " bytes (", TagDebugString(message.tag), ")")),
                  0);
    return;
  }
  if (!message.rendezvous) {
    if (message.length > 0) std::memcpy(request->receive_buffer_, payload, message.length);
    Release(message);
    FinishRequest(request.get(), absl::OkStatus(), static_cast<int64_t>(message.length));
    return;
  }
  // Straight into the receive buffer (zero-copy where the transport allows).
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE;
  param.cb.recv_am = &Transport::OnReceiveDataComplete;
  param.user_data = request.get();
  param.datatype = ucp_dt_make_contig(1);
  message.held = nullptr;  // UCX owns the descriptor from here, even on failure
  ucs_status_ptr_t r = ucp_am_recv_data_nbx(worker_, const_cast<void*>(payload),
                                            request->receive_buffer_, message.length, &param);
  if (r == nullptr) {
    FinishRequest(request.get(), absl::OkStatus(), static_cast<int64_t>(message.length));
  } else if (UCS_PTR_IS_ERR(r)) {
    FinishRequest(request.get(), UcxError(UCS_PTR_STATUS(r), "receive"), 0);
  } else if (!request->ucx_completed_) {
    request->ucx_request_ = r;
    in_flight_[request.get()] = request;
  }
}

void Transport::Release(ArrivedMessage& message) {
  if (message.held != nullptr) ucp_am_data_release(worker_, message.held);
  message.held = nullptr;
  message.copy.reset();
}

void Transport::ReleaseAllHeld() {
  for (auto& [tag, messages] : unexpected_) {
    for (ArrivedMessage& m : messages) {
      VLOG(1) << "dropping unreceived message (" << m.length
              << " bytes): " << TagDebugString(tag);
      Release(m);
    }
  }
  unexpected_.clear();
  unexpected_count_ = 0;
  unexpected_bytes_ = 0;
  std::vector<std::shared_ptr<MessageRequest>> receives;
  for (auto& [tag, waiting] : posted_) {
    for (auto& request : waiting) receives.push_back(std::move(request));
  }
  posted_.clear();
  for (auto& request : receives) {
    request->posted_ = false;
    FinishRequest(request.get(), absl::CancelledError("data plane transport shut down"), 0);
  }
}

void Transport::DropTaggedMessages() {
  for (int i = 0; i < kMaxTaggedDropsPerCall; ++i) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message = ucp_tag_probe_nb(worker_, 0, 0, /*remove=*/1, &info);
    if (message == nullptr) return;
    NoteDrop(DropReason::kTagged, [&] { return std::string(absl::StrCat(info.length, " bytes, ", TagDebugString(info.sender_tag))); });
    // Into an empty buffer: UCX completes it as truncated without copying
    // (a rendezvous sender is told and keeps its data).
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
    param.datatype = ucp_dt_make_contig(1);
    ucs_status_ptr_t r = ucp_tag_msg_recv_nbx(worker_, nullptr, 0, message, &param);
    if (r != nullptr && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);  // freed once complete
  }
}

// ---------------------------------------------------------------------------
// Completion.

void Transport::OnSendComplete(void* ucx_request, ucs_status_t status, void* user_data) {
  auto* request = static_cast<MessageRequest*>(user_data);
  Transport* self = request->owner_;
  ucp_request_free(ucx_request);
  request->ucx_request_ = nullptr;
  request->ucx_completed_ = true;
  self->FinishRequest(request, UcxError(status, "send"),
                      status == UCS_OK ? request->requested_bytes() : 0);
  self->in_flight_.erase(request);  // may free the request
}

void Transport::OnReceiveDataComplete(void* ucx_request, ucs_status_t status, size_t length,
                                      void* user_data) {
  auto* request = static_cast<MessageRequest*>(user_data);
  Transport* self = request->owner_;
  ucp_request_free(ucx_request);
  request->ucx_request_ = nullptr;
  request->ucx_completed_ = true;
  self->FinishRequest(request, UcxError(status, "receive"),
                      status == UCS_OK ? static_cast<int64_t>(length) : 0);
  self->in_flight_.erase(request);  // may free the request
}

void Transport::FinishRequest(MessageRequest* request, absl::Status status, int64_t bytes) {
  if (!request->SetResult(std::move(status), bytes)) return;
  if (request->on_complete_) {
    // Hooks run here, on the progress thread, before waiters wake (so, e.g.,
    // byte counters are current when Wait returns); they only queue work.
    auto hook = std::move(request->on_complete_);
    hook(*request);
  }
  request->MarkDone();
}

}  // namespace corescape::comm
