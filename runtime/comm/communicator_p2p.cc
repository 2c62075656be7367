// Communicator: point-to-point messages. They go straight to the transport
// (no queue, no sequence number), tagged with (key, sender, caller's tag).
#include "absl/strings/str_cat.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/communicator_internal.h"
#include "runtime/comm/message_tag.h"

namespace corescape::comm {
namespace internal {

// A point-to-point message's handle: waits with the communicator's timeout;
// a timeout breaks the communicator like a collective's would.
struct PointToPointResult final : HandleState {
  absl::Status Wait() override {
    if (!transport->WaitFor(*request, absl::Now() + timeout)) {
      WithCommunicator(life, [&](Communicator* c) {
        c->Abort(absl::StrCat("timed out after ", absl::FormatDuration(timeout), " ",
                              Describe()));
      });
      transport->WaitFor(*request, absl::Now() + kDrainLimit);  // cancelled by the abort
    }
    return Finish();
  }
  bool Test() override { return request->done(); }

  // A receive nobody waits for any more is withdrawn rather than left to
  // time out (which would break the communicator); a send is waited for,
  // since its buffer is in use until it completes.
  void Release() override {
    if (is_send || request->done()) {
      Wait().IgnoreError();
      return;
    }
    transport->Cancel(request);
    transport->WaitFor(*request, absl::Now() + kDrainLimit);
    Finish().IgnoreError();
  }

  std::string Describe() const {
    return absl::StrCat(is_send ? "sending point-to-point tag " : "receiving point-to-point tag ",
                        tag, is_send ? " to " : " from ", peer_description);
  }

  absl::Status Finish() {
    absl::MutexLock lock(&mu);
    if (finished) return final_status;
    if (!request->done()) {
      return absl::DeadlineExceededError(absl::StrCat(Describe(), ": still in flight"));
    }
    finished = true;
    absl::Status status = request->status();
    WithCommunicator(life, [&](Communicator* c) {
      c->UntrackPending(pending_id);
      if (!status.ok()) {
        absl::Status health = c->health();
        absl::Status gone = c->PeerGone(peer);
        if (!health.ok()) {
          status = health;
        } else if (!gone.ok()) {
          status = c->DecorateError(Describe(), gone);
        } else {
          status = c->DecorateError(
              "", absl::Status(status.code(), absl::StrCat(Describe(), ": ", status.message())));
        }
      } else if (!is_send && request->transferred_bytes() != bytes) {
        status = c->DecorateError(
            "", absl::DataLossError(absl::StrCat(Describe(), ": got ",
                                                 request->transferred_bytes(),
                                                 " bytes, expected ", bytes)));
      }
    });
    if (!status.ok() && status.message().find(peer_description) == std::string::npos &&
        status.message().find("rank") == std::string::npos) {
      status = absl::Status(status.code(), absl::StrCat(Describe(), ": ", status.message()));
    }
    final_status = status;
    return final_status;
  }

  std::shared_ptr<MessageRequest> request;
  std::shared_ptr<LifeToken> life;
  Transport* transport = nullptr;  // outlives the communicator and its handles
  int peer = 0;
  bool is_send = false;
  uint64_t tag = 0;
  int64_t bytes = 0;
  uint64_t pending_id = 0;
  absl::Duration timeout;
  std::string peer_description;
  absl::Mutex mu;
  bool finished ABSL_GUARDED_BY(mu) = false;
  absl::Status final_status ABSL_GUARDED_BY(mu);
};

}  // namespace internal

absl::StatusOr<std::unique_ptr<CollectiveHandle>> Communicator::SendAsync(int peer, uint64_t tag,
                                                                          const void* data,
                                                                          int64_t bytes) {
  return StartPointToPoint(/*send=*/true, peer, tag, const_cast<void*>(data), bytes);
}

absl::StatusOr<std::unique_ptr<CollectiveHandle>> Communicator::RecvAsync(int peer, uint64_t tag,
                                                                          void* data,
                                                                          int64_t bytes) {
  return StartPointToPoint(/*send=*/false, peer, tag, data, bytes);
}

absl::StatusOr<std::unique_ptr<CollectiveHandle>> Communicator::StartPointToPoint(
    bool send, int peer, uint64_t tag, void* data, int64_t bytes) {
  if (peer < 0 || peer >= world_size() || peer == rank()) {
    return absl::InvalidArgumentError(absl::StrCat("peer ", peer, " is not another rank of ",
                                                   world_size()));
  }
  if (tag > kMaxUserTag) {
    return absl::InvalidArgumentError(absl::StrCat("tag ", tag, " does not fit in 32 bits"));
  }
  if (bytes < 0 || (bytes > 0 && data == nullptr)) {
    return absl::InvalidArgumentError("bad buffer");
  }
  auto result = std::make_shared<internal::PointToPointResult>();
  result->life = life_;
  result->transport = transport_;
  result->peer = peer;
  result->is_send = send;
  result->tag = tag;
  result->bytes = bytes;
  result->timeout = options_.timeout;
  result->peer_description = DescribePeer(peer);
  std::shared_ptr<internal::LifeToken> life = life_;
  // Counted when the message completes, whether or not anyone waits.
  auto count = [life, send](const MessageRequest& r) {
    if (!r.status().ok()) return;
    internal::WithCommunicator(life, [&](Communicator* c) {
      c->CountBytes(CollectiveKind::kPointToPoint, send, r.transferred_bytes());
      absl::MutexLock lock(&c->counters_mu_);
      ++c->counters_[CollectiveKind::kPointToPoint].operations;
    });
  };
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return absl::FailedPreconditionError("the communicator is being destroyed");
    if (!broken_.ok()) return broken_;
    const Peer& p = peers_[peer];
    // A peer that left cannot send any more, but what it sent before its
    // goodbye is already here: a receive may still find it (below).
    if (p.failed || (send && p.departed)) {
      return DecorateError("", absl::UnavailableError(absl::StrCat(
                                   DescribePeer(peer), " has left the communicator")));
    }
    if (send) {
      result->request = transport_->Send(
          p.endpoint, PointToPointTag(tag_key_, rank(), static_cast<uint32_t>(tag)), data, bytes,
          count);
    } else {
      result->request = transport_->Recv(
          PointToPointTag(tag_key_, peer, static_cast<uint32_t>(tag)), data, bytes, count);
      if (p.departed) {
        // Queued after the receive is posted: if it did not match at once,
        // no message will ever come.
        Transport* transport = transport_;
        std::shared_ptr<MessageRequest> request = result->request;
        transport_->Run([transport, request] {
          if (!request->done()) transport->Cancel(request);
        });
      }
    }
    result->pending_id = next_pending_id_++;
    pending_[result->pending_id] = {result->request, peer, /*point_to_point=*/true};
  }
  return std::unique_ptr<CollectiveHandle>(new CollectiveHandle(std::move(result)));
}

}  // namespace corescape::comm
