// Communicator: failures and departures. A peer's endpoint error, a
// timeout, a protocol violation or an abort message breaks the communicator
// (first reason wins, every pending receive is cancelled, peers are told,
// endpoints are closed). A goodbye marks a clean departure.
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/communicator_internal.h"
#include "runtime/comm/message_tag.h"

namespace corescape::comm {
namespace {

// Between telling the peers about a failure and closing the endpoints, so
// the abort messages are on their way first.
constexpr absl::Duration kAbortLinger = absl::Milliseconds(100);
// Longest wait for goodbye acknowledgements when a communicator is destroyed.
constexpr absl::Duration kGoodbyeLimit = absl::Seconds(5);

}  // namespace

void Communicator::Abort(absl::string_view reason) {
  Break(DecorateError("", absl::AbortedError(reason)), /*notify_peers=*/true);
}

void Communicator::Break(absl::Status reason, bool notify_peers) {
  std::vector<std::shared_ptr<MessageRequest>> receives;
  std::vector<EndpointId> endpoints;
  {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return;
    broken_ = reason;
    for (auto& [id, pending] : pending_) {
      if (pending.request->is_receive()) receives.push_back(pending.request);
    }
    for (int r = 0; r < world_size(); ++r) {
      Peer& p = peers_[r];
      if (p.control_recv != nullptr) receives.push_back(p.control_recv);
      if (p.endpoint == 0) continue;
      if (notify_peers && !p.failed && !p.departed) {
        SendControl(r, ControlType::kAbort, std::string(reason.message()));
      }
      endpoints.push_back(p.endpoint);
      p.endpoint = 0;
    }
  }
  LOG(ERROR) << "data plane communicator broken: " << reason.message();
  for (auto& r : receives) transport_->Cancel(r);
  // Closing the endpoints fails the sends still in flight; it waits a moment
  // so the abort messages leave first.
  Transport* transport = transport_;
  transport_->RunAt(absl::Now() + kAbortLinger, [transport, endpoints] {
    for (EndpointId e : endpoints) transport->Close(e);
  });
}

void Communicator::OnPeerError(int peer, absl::Status error) {
  EndpointId endpoint = 0;
  bool departed = false;
  {
    absl::MutexLock lock(&mu_);
    ++connect_events_;
    Peer& p = peers_[peer];
    if (p.failed) return;
    endpoint = p.endpoint;
    departed = p.departed;
    if (closing_ || departed) {
      // We are leaving too, or it said goodbye first: the disconnect is the
      // end of a clean exit, not a failure (and what it sent before its
      // goodbye can still be received).
      VLOG_IF(1, departed) << DescribePeer(peer) << " disconnected after its goodbye";
      p.endpoint = 0;
      if (endpoint != 0) transport_->Close(endpoint);
      return;
    }
    p.failed = true;
    if (connecting_) {
      // Not formed yet: the dialing side tries again, the other side waits
      // for a new hello.
      p.state = LinkState::kIdle;
      p.endpoint = 0;
      p.last_error = error;
      p.retry_at = absl::Now() + p.backoff;
      if (endpoint != 0) transport_->Close(endpoint);
      return;
    }
  }
  Break(DecorateError("", absl::UnavailableError(absl::StrCat(DescribePeer(peer), " failed: ",
                                                              error.message()))),
        /*notify_peers=*/true);
}

void Communicator::PostControlRecv(int peer) {
  Peer& p = peers_[peer];
  std::shared_ptr<internal::LifeToken> life = life_;
  p.control_recv = transport_->Recv(
      ControlTag(tag_key_, peer), p.control_buffer.data(), kControlBytes,
      [life, peer](const MessageRequest& request) {
        internal::WithCommunicator(
            life, [&](Communicator* c) { c->OnControlMessage(peer, request); });
      });
}

void Communicator::SendControl(int peer, ControlType type, const std::string& reason) {
  const Peer& p = peers_[peer];
  if (p.endpoint == 0) return;
  ControlMessage m;
  m.type = type;
  m.generation = options_.generation;
  m.from_rank = options_.rank;
  m.completed_collectives = completed_collectives_;
  m.reason = reason;
  // The buffer lives until the send completes.
  auto bytes = std::make_shared<ControlMessage::Bytes>(m.Serialize());
  transport_->Send(p.endpoint, ControlTag(tag_key_, options_.rank), bytes->data(), kControlBytes,
                   [bytes](const MessageRequest&) {});
}

void Communicator::OnControlMessage(int peer, const MessageRequest& request) {
  if (!request.status().ok()) return;  // cancelled: we are closing or broken
  absl::StatusOr<ControlMessage> message;
  std::vector<std::shared_ptr<MessageRequest>> stranded;
  absl::Status break_reason;
  bool notify = false;
  {
    absl::MutexLock lock(&mu_);
    Peer& p = peers_[peer];
    message = ControlMessage::Parse(absl::string_view(
        p.control_buffer.data(), static_cast<size_t>(request.transferred_bytes())));
    if (message.ok() && (message->from_rank != peer ||
                         message->generation != options_.generation)) {
      message = absl::InvalidArgumentError(
          absl::StrCat("it claims rank ", message->from_rank, " generation ",
                       message->generation));
    }
    if (!message.ok()) {
      break_reason = absl::DataLossError(absl::StrCat("malformed control message from ",
                                                      DescribePeer(peer), ": ",
                                                      message.status().message()));
      notify = true;
    } else {
      switch (message->type) {
        case ControlType::kGoodbye:
          p.departed = true;
          p.departed_after = message->completed_collectives;
          SendControl(peer, ControlType::kGoodbyeAck, "");
          VLOG(1) << DescribePeer(peer) << " said goodbye after "
                  << message->completed_collectives << " collectives";
          // Everything it sent before the goodbye has been matched by now, so
          // a receive from it that is still pending can never complete.
          for (auto& [id, pending] : pending_) {
            if (pending.peer == peer && pending.point_to_point &&
                pending.request->is_receive()) {
              stranded.push_back(pending.request);
            }
          }
          if (running_sequence_ != ~uint64_t{0} && running_sequence_ >= p.departed_after) {
            break_reason = absl::UnavailableError(
                absl::StrCat(DescribePeer(peer), " left the communicator after ",
                             p.departed_after, " collectives"));
          }
          break;
        case ControlType::kGoodbyeAck:
          p.acked_our_goodbye = true;
          break;
        case ControlType::kAbort:
          break_reason = absl::AbortedError(absl::StrCat(
              DescribePeer(peer), " aborted the communicator: ", message->reason));
          break;
      }
      // Keep listening while closing too: the goodbye handshake is two
      // messages per peer. The destructor cancels the last receive.
      if (break_reason.ok() && broken_.ok()) PostControlRecv(peer);
    }
  }
  for (auto& r : stranded) transport_->Cancel(r);
  if (!break_reason.ok()) Break(DecorateError("", break_reason), notify);
}

void Communicator::SayGoodbye() {
  absl::MutexLock lock(&mu_);
  std::vector<int> waiting;
  for (int r = 0; r < world_size(); ++r) {
    const Peer& p = peers_[r];
    // A peer that said goodbye first has stopped listening (it only waited
    // for our acknowledgement), so it is not told.
    if (r == rank() || p.failed || p.departed || p.endpoint == 0) continue;
    SendControl(r, ControlType::kGoodbye, "");
    waiting.push_back(r);
  }
  auto all_acked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!broken_.ok()) return true;
    for (int r : waiting) {
      const Peer& p = peers_[r];
      if (!p.acked_our_goodbye && !p.failed && !p.departed) return false;
    }
    return true;
  };
  const absl::Duration limit = std::min(options_.timeout, kGoodbyeLimit);
  if (!mu_.AwaitWithTimeout(absl::Condition(&all_acked), limit)) {
    LOG(WARNING) << DecorateError("", absl::DeadlineExceededError(absl::StrCat(
                                          "some peers did not acknowledge our goodbye within ",
                                          absl::FormatDuration(limit))))
                        .message();
  }
}

}  // namespace corescape::comm
