#ifndef CORESCAPE_RUNTIME_COMM_COMMUNICATOR_INTERNAL_H_
#define CORESCAPE_RUNTIME_COMM_COMMUNICATOR_INTERNAL_H_

// Pieces of Communicator shared by its .cc files.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/message_channel.h"
#include "runtime/comm/message_request.h"

namespace corescape::comm::internal {

// How long a failed operation waits for its cancelled messages to settle.
inline constexpr absl::Duration kDrainLimit = absl::Seconds(5);

// Transport callbacks hold one of these instead of the Communicator: the
// destructor clears `communicator` (waiting for a callback that holds the
// mutex), after which callbacks do nothing.
struct LifeToken {
  absl::Mutex mu;
  Communicator* communicator ABSL_GUARDED_BY(mu) = nullptr;
};

template <typename Fn>
void WithCommunicator(const std::shared_ptr<LifeToken>& life, Fn&& fn) {
  absl::MutexLock lock(&life->mu);
  if (life->communicator != nullptr) fn(life->communicator);
}

struct HandleState {
  virtual ~HandleState() = default;
  virtual absl::Status Wait() = 0;
  virtual bool Test() = 0;
  // The handle is being destroyed: finish without blocking for long.
  virtual void Release() { Wait().IgnoreError(); }
};

// Result of a queued collective, set by the executor.
struct OperationResult final : HandleState {
  void Complete(absl::Status s) {
    absl::MutexLock lock(&mu);
    status = std::move(s);
    done = true;
  }
  absl::Status Wait() override {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&done));
    return status;
  }
  bool Test() override {
    absl::MutexLock lock(&mu);
    return done;
  }

  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
};

struct Operation {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  uint64_t sequence = 0;
  std::function<absl::Status(MessageChannel&)> body;
  std::shared_ptr<OperationResult> result = std::make_shared<OperationResult>();
};

// The MessageChannel of one collective: tagged messages with
// (key, sender, kind, sequence, index), size checks, timeouts, byte counts.
class CollectiveChannel final : public MessageChannel {
 public:
  CollectiveChannel(Communicator* communicator, CollectiveKind kind, uint64_t sequence);

  int rank() const override;
  int world_size() const override;
  absl::StatusOr<MessageId> Send(int peer, uint32_t index, const void* data,
                                 int64_t bytes) override;
  absl::StatusOr<MessageId> Recv(int peer, uint32_t index, void* data, int64_t bytes) override;
  absl::Status Wait(MessageId id) override;
  void* Scratch(int slot, int64_t bytes) override;

  // After a failure: waits (up to `limit`) for messages still in flight, so
  // UCX no longer touches the caller's buffers when the operation returns.
  void Drain(absl::Duration limit);
  std::string OperationName() const;

 private:
  struct Message {
    std::shared_ptr<MessageRequest> request;
    uint64_t pending_id;
    int peer;
    uint32_t index;
    bool is_send;
    int64_t bytes;
    bool finished = false;
  };
  absl::StatusOr<MessageId> Start(bool is_send, int peer, uint32_t index, void* data,
                                  int64_t bytes);
  absl::Status Fail(absl::Status reason);

  Communicator* const communicator_;
  const CollectiveKind kind_;
  const uint64_t sequence_;
  std::vector<Message> messages_;
};

}  // namespace corescape::comm::internal

#endif  // CORESCAPE_RUNTIME_COMM_COMMUNICATOR_INTERNAL_H_
