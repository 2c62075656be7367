#ifndef CORESCAPE_RUNTIME_TRAIN_DATA_PARALLEL_GROUP_H_
#define CORESCAPE_RUNTIME_TRAIN_DATA_PARALLEL_GROUP_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "runtime/optim/rank_group.h"

namespace corescape::train {

// The collectives of a data-parallel job as one rank sees them: the
// optimizer's RankGroup (all-reduce, all-gather-v, byte counters) plus
// Abort. Implemented over the data plane's communicator by the worker, and
// trivially for one process. Results are bitwise identical on every rank.
class DataParallelGroup : public optim::RankGroup {
 public:
  // Makes pending and later collectives fail at once (a stopped job must not
  // sit out a peer's timeout). Thread-safe.
  virtual void Abort(const std::string& reason) {}
  // A group of the same ranks whose collectives are ordered independently of
  // this one's, for a job's small control collectives (token counts,
  // losses), where the implementation has one; null where it has none.
  virtual DataParallelGroup* control_channel() { return nullptr; }
};

// World size 1: every collective is the identity.
class SingleProcessGroup final : public DataParallelGroup {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(float*, int64_t) override { return absl::OkStatus(); }
  absl::Status AllReduceSumOnDevice(float*, int64_t) override { return absl::OkStatus(); }
  absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                          absl::Span<const int64_t>) override {
    if (send_bytes > 0 && send != recv) std::memmove(recv, send, send_bytes);
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<optim::PendingCollective>> StartAllGatherV(
      const void* send, int64_t send_bytes, void* recv,
      absl::Span<const int64_t> bytes_per_rank) override {
    if (absl::Status s = AllGatherV(send, send_bytes, recv, bytes_per_rank); !s.ok()) return s;
    return std::unique_ptr<optim::PendingCollective>(new Done());
  }
  int64_t bytes_sent() const override { return 0; }
  int64_t bytes_received() const override { return 0; }

 private:
  struct Done final : optim::PendingCollective {
    absl::Status Wait() override { return absl::OkStatus(); }
  };
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_DATA_PARALLEL_GROUP_H_
