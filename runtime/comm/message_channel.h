#ifndef CORESCAPE_RUNTIME_COMM_MESSAGE_CHANNEL_H_
#define CORESCAPE_RUNTIME_COMM_MESSAGE_CHANNEL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace corescape::comm {

// One collective operation's view of the group, as the algorithms in
// collective_algorithms.h see it: numbered messages to and from peers by
// rank. The UCX communicator implements it with tagged messages; tests use an
// in-process fabric. Implementations count payload bytes of messages that
// complete, and fail a message (naming the peer) on a size mismatch, a
// timeout or a peer failure.
//
// A message is identified by (sender, receiver, index) within the operation;
// each must be used once. Buffers must stay valid, and a send buffer
// unchanged, until Wait returns. Algorithms may return on the first error
// without waiting for their other messages: the owner of the channel cleans
// up after a failed operation.
class MessageChannel {
 public:
  using MessageId = int64_t;

  virtual ~MessageChannel() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  virtual absl::StatusOr<MessageId> Send(int peer, uint32_t index, const void* data,
                                         int64_t bytes) = 0;
  // Receives exactly `bytes`; a message of another size is an error.
  virtual absl::StatusOr<MessageId> Recv(int peer, uint32_t index, void* data,
                                         int64_t bytes) = 0;
  virtual absl::Status Wait(MessageId id) = 0;

  // Working memory for the operation: `slot` names independent buffers; the
  // memory may be reused by later operations (so it is not zeroed).
  virtual void* Scratch(int slot, int64_t bytes) = 0;
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_MESSAGE_CHANNEL_H_
