#ifndef CORESCAPE_RUNTIME_COMM_MESSAGE_REQUEST_H_
#define CORESCAPE_RUNTIME_COMM_MESSAGE_REQUEST_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace corescape::comm {

class Transport;

// One data-plane send or receive (a message named by a 64-bit tag) in flight
// on a Transport. Completed once, on
// the progress thread; any thread may wait for it.
class MessageRequest {
 public:
  MessageRequest(bool is_receive, uint64_t tag, int64_t bytes)
      : is_receive_(is_receive), tag_(tag), requested_bytes_(bytes) {}

  MessageRequest(const MessageRequest&) = delete;
  MessageRequest& operator=(const MessageRequest&) = delete;

  bool is_receive() const { return is_receive_; }
  uint64_t tag() const { return tag_; }
  // Bytes to send, or the receive buffer's capacity.
  int64_t requested_bytes() const { return requested_bytes_; }

  bool done() const {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  // True once done; false if `deadline` passed first.
  bool WaitUntil(absl::Time deadline) const {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithDeadline(absl::Condition(&done_), deadline);
  }
  // Valid once done (and inside the completion callback).
  absl::Status status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  // Bytes moved: the length of the received message for receives.
  int64_t transferred_bytes() const {
    absl::MutexLock lock(&mu_);
    return transferred_bytes_;
  }

 private:
  friend class Transport;

  // Completion has two steps so the completion callback sees the result
  // before any waiter wakes up. The first SetResult wins.
  bool SetResult(absl::Status status, int64_t bytes) {
    absl::MutexLock lock(&mu_);
    if (done_ || has_result_) return false;
    has_result_ = true;
    status_ = std::move(status);
    transferred_bytes_ = bytes;
    return true;
  }
  void MarkDone() {
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

  const bool is_receive_;
  const uint64_t tag_;
  const int64_t requested_bytes_;

  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool has_result_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t transferred_bytes_ ABSL_GUARDED_BY(mu_) = 0;

  // Progress thread only: the UCX request while UCX holds it.
  Transport* owner_ = nullptr;
  void* ucx_request_ = nullptr;
  bool ucx_completed_ = false;  // UCX's callback has run (possibly inside the post)
  void* receive_buffer_ = nullptr;  // receives: where the message goes
  bool posted_ = false;             // receives: waiting for a message with its tag
  // Sends: the message header (tag, link token); UCX reads it until the send
  // completes.
  char wire_header_[16] = {};
  std::function<void(const MessageRequest&)> on_complete_;
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_MESSAGE_REQUEST_H_
