#include "runtime/comm/in_process_fabric.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace corescape::comm {

class InProcessChannel final : public MessageChannel {
 public:
  InProcessChannel(InProcessFabric* fabric, int rank, int64_t operation, CollectiveKind kind,
                   ByteCounters* counters)
      : fabric_(fabric), rank_(rank), operation_(operation), kind_(kind), counters_(counters) {}

  int rank() const override { return rank_; }
  int world_size() const override { return fabric_->world_size_; }

  absl::StatusOr<MessageId> Send(int peer, uint32_t index, const void* data,
                                 int64_t bytes) override {
    if (peer < 0 || peer >= world_size() || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("bad peer ", peer));
    }
    InProcessFabric::Key key{operation_, rank_, peer, index};
    absl::MutexLock lock(&fabric_->mu_);
    InProcessFabric::Slot& slot = fabric_->slots_[key];
    if (slot.send_posted) {
      return absl::InternalError(absl::StrCat("message ", index, " to rank ", peer, " sent twice"));
    }
    slot.send_posted = true;
    slot.send_bytes = bytes;
    if (fabric_->mode_ == InProcessFabric::Mode::kEager) {
      slot.eager_copy.assign(static_cast<const char*>(data),
                             static_cast<const char*>(data) + bytes);
    } else {
      slot.send_data = static_cast<const char*>(data);
    }
    if (slot.recv_posted) fabric_->DeliverLocked(slot);
    messages_.push_back({key, /*is_send=*/true, bytes, peer});
    return static_cast<MessageId>(messages_.size() - 1);
  }

  absl::StatusOr<MessageId> Recv(int peer, uint32_t index, void* data, int64_t bytes) override {
    if (peer < 0 || peer >= world_size() || peer == rank_) {
      return absl::InvalidArgumentError(absl::StrCat("bad peer ", peer));
    }
    InProcessFabric::Key key{operation_, peer, rank_, index};
    absl::MutexLock lock(&fabric_->mu_);
    InProcessFabric::Slot& slot = fabric_->slots_[key];
    if (slot.recv_posted) {
      return absl::InternalError(
          absl::StrCat("message ", index, " from rank ", peer, " received twice"));
    }
    slot.recv_posted = true;
    slot.recv_data = static_cast<char*>(data);
    slot.recv_bytes = bytes;
    if (slot.send_posted) fabric_->DeliverLocked(slot);
    messages_.push_back({key, /*is_send=*/false, bytes, peer});
    return static_cast<MessageId>(messages_.size() - 1);
  }

  absl::Status Wait(MessageId id) override {
    if (id < 0 || id >= static_cast<MessageId>(messages_.size())) {
      return absl::InvalidArgumentError("unknown message id");
    }
    const Message& m = messages_[id];
    absl::MutexLock lock(&fabric_->mu_);
    InProcessFabric::Slot* slot = &fabric_->slots_[m.key];
    const bool eager_send = m.is_send && fabric_->mode_ == InProcessFabric::Mode::kEager;
    if (!eager_send) {
      auto delivered = [slot]() { return slot->delivered; };
      if (!fabric_->mu_.AwaitWithTimeout(absl::Condition(&delivered), fabric_->timeout_)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", rank_, ": timed out ", m.is_send ? "sending message " : "receiving message ",
            std::get<3>(m.key), m.is_send ? " to rank " : " from rank ", m.peer));
      }
    }
    if (!m.is_send && slot->size_mismatch) {
      return absl::DataLossError(absl::StrCat("rank ", rank_, ": message ", std::get<3>(m.key),
                                              " from rank ", m.peer, " has ", slot->send_bytes,
                                              " bytes, expected ", slot->recv_bytes));
    }
    KindCounters& c = (*counters_)[kind_];
    (m.is_send ? c.bytes_sent : c.bytes_received) += m.bytes;
    return absl::OkStatus();
  }

  void* Scratch(int slot, int64_t bytes) override {
    if (static_cast<int>(scratch_.size()) <= slot) scratch_.resize(slot + 1);
    if (static_cast<int64_t>(scratch_[slot].size()) < bytes) scratch_[slot].resize(bytes);
    return scratch_[slot].data();
  }

 private:
  struct Message {
    InProcessFabric::Key key;
    bool is_send;
    int64_t bytes;
    int peer;
  };
  InProcessFabric* const fabric_;
  const int rank_;
  const int64_t operation_;
  const CollectiveKind kind_;
  ByteCounters* const counters_;
  std::vector<Message> messages_;
  std::vector<std::vector<char>> scratch_;
};

InProcessFabric::InProcessFabric(int world_size, Mode mode, absl::Duration timeout)
    : world_size_(world_size), mode_(mode), timeout_(timeout) {}

std::unique_ptr<MessageChannel> InProcessFabric::OpenChannel(int rank, int64_t operation,
                                                             CollectiveKind kind,
                                                             ByteCounters* counters) {
  return std::make_unique<InProcessChannel>(this, rank, operation, kind, counters);
}

void InProcessFabric::DeliverLocked(Slot& slot) {
  if (slot.send_bytes != slot.recv_bytes) {
    slot.size_mismatch = true;
  } else if (slot.send_bytes > 0) {
    const char* from = mode_ == Mode::kEager ? slot.eager_copy.data() : slot.send_data;
    std::memcpy(slot.recv_data, from, slot.send_bytes);
  }
  slot.delivered = true;
}

}  // namespace corescape::comm
