// Communicator: the operations. Collectives are validated on the caller's
// thread, queued, and run in issue order on the executor thread through a
// CollectiveChannel; point-to-point messages go straight to the transport.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/communicator_internal.h"
#include "runtime/comm/message_tag.h"

namespace corescape::comm {
namespace internal {

CollectiveChannel::CollectiveChannel(Communicator* communicator, CollectiveKind kind,
                                     uint64_t sequence)
    : communicator_(communicator), kind_(kind), sequence_(sequence) {}

int CollectiveChannel::rank() const { return communicator_->rank(); }
int CollectiveChannel::world_size() const { return communicator_->world_size(); }

std::string CollectiveChannel::OperationName() const {
  return absl::StrCat(CollectiveKindName(kind_), " #", sequence_);
}

absl::StatusOr<MessageChannel::MessageId> CollectiveChannel::Send(int peer, uint32_t index,
                                                                  const void* data,
                                                                  int64_t bytes) {
  return Start(/*is_send=*/true, peer, index, const_cast<void*>(data), bytes);
}

absl::StatusOr<MessageChannel::MessageId> CollectiveChannel::Recv(int peer, uint32_t index,
                                                                  void* data, int64_t bytes) {
  return Start(/*is_send=*/false, peer, index, data, bytes);
}

absl::StatusOr<MessageChannel::MessageId> CollectiveChannel::Start(bool is_send, int peer,
                                                                   uint32_t index, void* data,
                                                                   int64_t bytes) {
  Communicator& c = *communicator_;
  if (peer < 0 || peer >= c.world_size() || peer == c.rank() || index > kMaxMessageIndex) {
    return Fail(absl::InternalError(
        absl::StrCat("bad message ", index, " for peer ", peer, " (algorithm bug)")));
  }
  Message m{nullptr, 0, peer, index, is_send, bytes};
  {
    absl::MutexLock lock(&c.mu_);
    if (!c.broken_.ok()) return c.broken_;
    const Communicator::Peer& p = c.peers_[peer];
    if (is_send) {
      m.request = c.transport_->Send(
          p.endpoint, CollectiveTag(c.tag_key_, c.rank(), kind_, sequence_, index), data, bytes);
    } else {
      m.request = c.transport_->Recv(
          CollectiveTag(c.tag_key_, peer, kind_, sequence_, index), data, bytes);
    }
    m.pending_id = c.next_pending_id_++;
    c.pending_[m.pending_id] = {m.request, peer, /*point_to_point=*/false};
  }
  messages_.push_back(std::move(m));
  return static_cast<MessageId>(messages_.size() - 1);
}

absl::Status CollectiveChannel::Fail(absl::Status reason) {
  communicator_->Break(communicator_->DecorateError(OperationName(), reason),
                       /*notify_peers=*/true);
  return communicator_->health();
}

absl::Status CollectiveChannel::Wait(MessageId id) {
  if (id < 0 || id >= static_cast<MessageId>(messages_.size())) {
    return Fail(absl::InternalError("unknown message id (algorithm bug)"));
  }
  Message& m = messages_[id];
  Communicator& c = *communicator_;
  auto describe = [&] {
    return absl::StrCat(m.is_send ? "sending message " : "receiving message ", m.index,
                        m.is_send ? " to " : " from ", c.DescribePeer(m.peer));
  };
  if (!c.transport_->WaitFor(*m.request, absl::Now() + c.options_.timeout)) {
    return Fail(absl::DeadlineExceededError(
        absl::StrCat("timed out after ", absl::FormatDuration(c.options_.timeout), " ",
                     describe(), " (the peer is stalled, dead, or not in this operation)")));
  }
  m.finished = true;
  c.UntrackPending(m.pending_id);
  absl::Status status = m.request->status();
  if (!status.ok()) {
    if (absl::Status health = c.health(); !health.ok()) return health;  // names the cause
    return Fail(absl::Status(status.code(), absl::StrCat(describe(), ": ", status.message())));
  }
  if (!m.is_send && m.request->transferred_bytes() != m.bytes) {
    return Fail(absl::DataLossError(absl::StrCat(
        describe(), ": got ", m.request->transferred_bytes(), " bytes, expected ", m.bytes,
        " (the ranks disagree on this operation's arguments)")));
  }
  c.CountBytes(kind_, m.is_send, m.bytes);
  return absl::OkStatus();
}

void* CollectiveChannel::Scratch(int slot, int64_t bytes) {
  return communicator_->Scratch(slot, bytes);
}

void CollectiveChannel::Drain(absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  for (Message& m : messages_) {
    if (m.finished) continue;
    if (!communicator_->transport_->WaitFor(*m.request, deadline)) {
      LOG(ERROR) << communicator_->DecorateError(
                        OperationName(),
                        absl::DeadlineExceededError(
                            "a cancelled message is still held by UCX; its buffer may "
                            "still be accessed"))
                        .message();
    }
    communicator_->UntrackPending(m.pending_id);
  }
}

}  // namespace internal

// ---------------------------------------------------------------------------
// Collectives.

absl::StatusOr<std::unique_ptr<CollectiveHandle>> Communicator::Enqueue(
    CollectiveKind kind, std::function<absl::Status(MessageChannel&)> body) {
  auto op = std::make_unique<internal::Operation>();
  op->kind = kind;
  op->body = std::move(body);
  std::shared_ptr<internal::OperationResult> result = op->result;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) {
      return absl::FailedPreconditionError("the communicator is being destroyed");
    }
    if (!broken_.ok()) return broken_;
    op->sequence = next_sequence_++;
    queue_.push_back(std::move(op));
  }
  return std::unique_ptr<CollectiveHandle>(new CollectiveHandle(std::move(result)));
}

void Communicator::ExecutorLoop() {
  while (true) {
    std::unique_ptr<internal::Operation> op;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || closing_;
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::Status status = RunOperation(*op);
    op->result->Complete(std::move(status));
  }
}

absl::Status Communicator::RunOperation(internal::Operation& op) {
  internal::CollectiveChannel channel(this, op.kind, op.sequence);
  absl::Status departure;
  {
    absl::MutexLock lock(&mu_);
    if (!broken_.ok()) return broken_;
    for (int r = 0; r < world_size(); ++r) {
      const Peer& p = peers_[r];
      if (p.departed && p.departed_after <= op.sequence) {
        departure = absl::UnavailableError(
            absl::StrCat(DescribePeer(r), " left the communicator after ", p.departed_after,
                         " collectives"));
        break;
      }
    }
    running_sequence_ = op.sequence;
  }
  absl::Status status;
  if (!departure.ok()) {
    Break(DecorateError(channel.OperationName(), departure), /*notify_peers=*/false);
    status = health();
  } else {
    status = op.body(channel);
    if (!status.ok()) {
      if (health().ok()) {
        Break(DecorateError(channel.OperationName(), status), /*notify_peers=*/true);
      }
      channel.Drain(internal::kDrainLimit);
      status = health();
    }
  }
  absl::MutexLock lock(&mu_);
  running_sequence_ = ~uint64_t{0};
  if (status.ok()) {
    completed_collectives_ = op.sequence + 1;
    absl::MutexLock counters_lock(&counters_mu_);
    ++counters_[op.kind].operations;
  }
  return status;
}

void* Communicator::Scratch(int slot, int64_t bytes) {
  if (static_cast<int>(scratch_.size()) <= slot) {
    scratch_.resize(slot + 1);
    scratch_bytes_.resize(slot + 1, 0);
  }
  if (scratch_bytes_[slot] < bytes) {
    scratch_[slot].reset(new char[bytes]);  // uninitialised: it is always written first
    scratch_bytes_[slot] = bytes;
  }
  return scratch_[slot].get();
}

void Communicator::CountBytes(CollectiveKind kind, bool sent, int64_t bytes) {
  absl::MutexLock lock(&counters_mu_);
  KindCounters& c = counters_[kind];
  (sent ? c.bytes_sent : c.bytes_received) += bytes;
}

ByteCounters Communicator::counters() const {
  absl::MutexLock lock(&counters_mu_);
  return counters_;
}

absl::Status Communicator::health() const {
  absl::MutexLock lock(&mu_);
  return broken_;
}

absl::Status Communicator::PeerGone(int peer) const {
  absl::MutexLock lock(&mu_);
  const Peer& p = peers_[peer];
  if (p.departed) {
    return absl::UnavailableError(absl::StrCat(DescribePeer(peer), " left the communicator"));
  }
  if (p.failed) return absl::UnavailableError(absl::StrCat(DescribePeer(peer), " failed"));
  return absl::OkStatus();
}

void Communicator::UntrackPending(uint64_t id) {
  absl::MutexLock lock(&mu_);
  pending_.erase(id);
}

absl::StatusOr<std::unique_ptr<CollectiveHandle>> Communicator::AllReduceAsync(float* data,
                                                                                int64_t count,
                                                                                ReduceOp op) {
  if (absl::Status s = ValidateAllReduceArgs(data, count); !s.ok()) return s;
  const AlgorithmSettings settings = options_.algorithms;
  return Enqueue(CollectiveKind::kAllReduce, [=](MessageChannel& channel) {
    return RunAllReduce(channel, settings, data, count, op);
  });
}

absl::StatusOr<std::unique_ptr<CollectiveHandle>> Communicator::AllGatherVAsync(
    const void* send, int64_t send_bytes, void* recv,
    absl::Span<const int64_t> recv_bytes_per_rank) {
  if (absl::Status s = ValidateAllGatherVArgs(rank(), world_size(), send, send_bytes, recv,
                                              recv_bytes_per_rank);
      !s.ok()) {
    return s;
  }
  // The caller may reuse `send` as soon as this returns: its bytes go to
  // their slot of `recv` now.
  int64_t offset = 0;
  for (int r = 0; r < rank(); ++r) offset += recv_bytes_per_rank[r];
  char* own_slot = static_cast<char*>(recv) + offset;
  if (send_bytes > 0 && send != own_slot) std::memmove(own_slot, send, send_bytes);
  std::vector<int64_t> sizes(recv_bytes_per_rank.begin(), recv_bytes_per_rank.end());
  const AlgorithmSettings settings = options_.algorithms;
  return Enqueue(CollectiveKind::kAllGather,
                 [=, sizes = std::move(sizes)](MessageChannel& channel) {
                   return RunAllGatherV(channel, settings, own_slot, recv, sizes);
                 });
}

absl::StatusOr<std::unique_ptr<CollectiveHandle>> Communicator::ReduceScatterAsync(
    const float* send, float* recv, absl::Span<const int64_t> counts_per_rank, ReduceOp op) {
  if (absl::Status s =
          ValidateReduceScatterArgs(rank(), world_size(), send, recv, counts_per_rank);
      !s.ok()) {
    return s;
  }
  std::vector<int64_t> counts(counts_per_rank.begin(), counts_per_rank.end());
  const AlgorithmSettings settings = options_.algorithms;
  return Enqueue(CollectiveKind::kReduceScatter,
                 [=, counts = std::move(counts)](MessageChannel& channel) {
                   return RunReduceScatter(channel, settings, send, recv, counts, op);
                 });
}

absl::StatusOr<std::unique_ptr<CollectiveHandle>> Communicator::BroadcastAsync(void* data,
                                                                                int64_t bytes,
                                                                                int root) {
  if (absl::Status s = ValidateBroadcastArgs(world_size(), data, bytes, root); !s.ok()) return s;
  const AlgorithmSettings settings = options_.algorithms;
  return Enqueue(CollectiveKind::kBroadcast, [=](MessageChannel& channel) {
    return RunBroadcast(channel, settings, data, bytes, root);
  });
}

namespace {
absl::Status WaitFor(absl::StatusOr<std::unique_ptr<CollectiveHandle>> handle) {
  if (!handle.ok()) return handle.status();
  return (*handle)->Wait();
}
}  // namespace

absl::Status Communicator::AllReduce(float* data, int64_t count, ReduceOp op) {
  return WaitFor(AllReduceAsync(data, count, op));
}

absl::Status Communicator::AllGatherV(const void* send, int64_t send_bytes, void* recv,
                                      absl::Span<const int64_t> recv_bytes_per_rank) {
  return WaitFor(AllGatherVAsync(send, send_bytes, recv, recv_bytes_per_rank));
}

absl::Status Communicator::ReduceScatter(const float* send, float* recv,
                                         absl::Span<const int64_t> counts_per_rank,
                                         ReduceOp op) {
  return WaitFor(ReduceScatterAsync(send, recv, counts_per_rank, op));
}

absl::Status Communicator::Broadcast(void* data, int64_t bytes, int root) {
  return WaitFor(BroadcastAsync(data, bytes, root));
}

absl::Status Communicator::Barrier() {
  return WaitFor(Enqueue(CollectiveKind::kBarrier,
                         [](MessageChannel& channel) { return RunBarrier(channel); }));
}

}  // namespace corescape::comm
