#ifndef CORESCAPE_RUNTIME_OPTIM_RANK_GROUP_H_
#define CORESCAPE_RUNTIME_OPTIM_RANK_GROUP_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace corescape::optim {

// A collective started asynchronously. Wait() returns once the result is in
// the buffer given at the start; the buffers must outlive the handle.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual absl::Status Wait() = 0;
};

// The collectives a data-parallel optimizer needs, as seen by one rank.
// Kept close to the data plane's communicator (runtime/comm: AllReduce with a
// ReduceOp, AllGatherV with per-rank receive sizes, async forms, byte
// counters) so one adapter puts the same optimizer code on the network; the
// in-process implementation runs P ranks in one process without one.
//
// Every rank must issue the same collectives in the same order.
class RankGroup {
 public:
  virtual ~RankGroup() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // data ← Σ_ranks data, element-wise. The result is bitwise identical on
  // every rank (summed in a fixed order).
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;

  // AllReduceSum of `count` floats in the memory of the GPU this group's
  // collectives run on, reduced there without staging through the host
  // (NCCL). Groups whose collectives read host memory refuse
  // (UNIMPLEMENTED); a backend whose memory is the host's uses
  // AllReduceSum.
  virtual absl::Status AllReduceSumOnDevice(float* device_data, int64_t count);
  // AllReduceSum where `data` is: host memory, or the group's GPU's.
  absl::Status AllReduceSumIn(float* data, int64_t count, bool host_memory) {
    return host_memory ? AllReduceSum(data, count) : AllReduceSumOnDevice(data, count);
  }

  // recv ← every rank's bytes, concatenated in rank order.
  // bytes_per_rank[r] is rank r's size; send_bytes must equal
  // bytes_per_rank[rank()]. Sizes may differ per rank.
  virtual absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                                  absl::Span<const int64_t> bytes_per_rank) = 0;

  // Asynchronous AllGatherV: `send` is consumed before the call returns,
  // `recv` is written by the time Wait() returns. bytes_per_rank is copied.
  virtual absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGatherV(
      const void* send, int64_t send_bytes, void* recv,
      absl::Span<const int64_t> bytes_per_rank) = 0;

  // Bytes this rank has put on / taken off the wire so far. Implementations
  // count what their algorithm moves (the in-process group: a ring).
  virtual int64_t bytes_sent() const = 0;
  virtual int64_t bytes_received() const = 0;

  // Every rank's int64 (e.g. a size) in rank order: an AllGatherV of 8 bytes
  // per rank.
  absl::Status AllGatherInt64(int64_t value, absl::Span<int64_t> values);
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_RANK_GROUP_H_
