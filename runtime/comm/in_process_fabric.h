#ifndef CORESCAPE_RUNTIME_COMM_IN_PROCESS_FABRIC_H_
#define CORESCAPE_RUNTIME_COMM_IN_PROCESS_FABRIC_H_

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/comm/byte_counters.h"
#include "runtime/comm/message_channel.h"

namespace corescape::comm {

// MessageChannels between threads of one process, for testing the collective
// algorithms without UCX. Two delivery modes mirror UCX's protocols:
//   kEager       a send copies its data at once and completes;
//   kRendezvous  the data is copied from the sender's buffer only when the
//                receive is posted, and the send completes then, so an
//                algorithm that overwrites a buffer still being sent, or
//                waits for a send before posting the receive its peer
//                needs, fails (wrong data or a timeout) as it would on UCX.
class InProcessFabric {
 public:
  enum class Mode { kEager, kRendezvous };

  InProcessFabric(int world_size, Mode mode, absl::Duration timeout = absl::Seconds(10));

  // The channel of `rank` for operation number `operation` (the same number
  // on every rank). Completed messages are counted in `counters` under `kind`.
  std::unique_ptr<MessageChannel> OpenChannel(int rank, int64_t operation,
                                              CollectiveKind kind, ByteCounters* counters);

 private:
  friend class InProcessChannel;
  using Key = std::tuple<int64_t, int, int, uint32_t>;  // operation, from, to, index
  struct Slot {
    bool send_posted = false;
    bool recv_posted = false;
    bool delivered = false;
    const char* send_data = nullptr;  // rendezvous: the sender's buffer
    std::vector<char> eager_copy;
    int64_t send_bytes = 0;
    char* recv_data = nullptr;
    int64_t recv_bytes = 0;
    bool size_mismatch = false;
  };

  void DeliverLocked(Slot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int world_size_;
  const Mode mode_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::map<Key, Slot> slots_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_IN_PROCESS_FABRIC_H_
