#ifndef CORESCAPE_RUNTIME_COMM_NCCL_COMMUNICATOR_H_
#define CORESCAPE_RUNTIME_COMM_NCCL_COMMUNICATOR_H_

// Collectives on device buffers through NCCL. Built only with --config=cuda
// (the target is empty otherwise).

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "runtime/comm/byte_counters.h"
#include "runtime/comm/comm_types.h"

namespace corescape::comm {

// NCCL's unique id (NCCL_UNIQUE_ID_BYTES bytes), made on one rank and handed
// to the others by the scheduler.
absl::StatusOr<std::string> CreateNcclUniqueId();

struct NcclCommunicatorOptions {
  int rank = 0;
  int world_size = 1;
  std::string unique_id;  // from CreateNcclUniqueId(), the same on every rank
  int device = -1;        // CUDA device; -1 keeps the current one
  // Initialisation and every Synchronize() fail after this long (aborting
  // the NCCL communicator) instead of hanging on a dead or stalled peer.
  absl::Duration timeout = absl::Seconds(30);
  uint64_t generation = 0;  // for errors and logs
  std::string job_id;
};

// The same operations as Communicator, on device memory. Each call enqueues
// work on `stream` and returns; Synchronize(stream) waits for it with the
// timeout, watching NCCL's asynchronous errors. Operations must be issued in
// the same order on every rank. NCCL's ring and tree all-reduce give every
// rank the same bits. NCCL cannot say which peer failed: errors name the
// job, generation and rank.
class NcclCommunicator {
 public:
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(
      const NcclCommunicatorOptions& options);
  ~NcclCommunicator();  // ncclCommDestroy, or ncclCommAbort once broken

  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }

  absl::Status AllReduce(float* data, int64_t count, ReduceOp op, cudaStream_t stream);
  // Equal sizes use ncclAllGather; unequal ones a group of broadcasts.
  absl::Status AllGatherV(const void* send, int64_t send_bytes, void* recv,
                          absl::Span<const int64_t> recv_bytes_per_rank, cudaStream_t stream);
  // Equal counts use ncclReduceScatter; unequal ones a group of reduces.
  absl::Status ReduceScatter(const float* send, float* recv,
                             absl::Span<const int64_t> counts_per_rank, ReduceOp op,
                             cudaStream_t stream);
  absl::Status Broadcast(void* data, int64_t bytes, int root, cudaStream_t stream);

  // Waits for `stream`; on timeout, an NCCL error or Abort(), aborts the
  // communicator (this rank's pending operations fail at once; NCCL tells
  // no peer, so theirs fail at their own timeout) and returns the error.
  // From any thread (it makes the communicator's device the thread's own
  // first).
  absl::Status Synchronize(cudaStream_t stream);
  // From any thread: fails every later call and makes a Synchronize, or a
  // call waiting for NCCL to finish issuing (a first connection to a
  // peer), in progress abort the NCCL communicator and return CANCELLED
  // with `reason` (a stopped job must not sit out a peer's timeout).
  void Abort(const std::string& reason);

  // NCCL does not report its traffic: these count the bytes a ring moves for
  // each operation (the model in docs/data_plane.md), for volume reporting.
  ByteCounters counters() const;
  absl::Status health() const;

 private:
  explicit NcclCommunicator(const NcclCommunicatorOptions& options);
  absl::Status Init();
  // Turns an NCCL result into a Status; waits out ncclInProgress (the
  // communicator is non-blocking so that initialisation can time out), or
  // until Abort().
  absl::Status Check(ncclResult_t result, const char* what);
  // call(comm) under comm_mu_ (shared): ncclInvalidUsage once aborted.
  template <typename Call>
  ncclResult_t WithComm(Call call) ABSL_LOCKS_EXCLUDED(comm_mu_);
  // The communicator's asynchronous error state.
  ncclResult_t AsyncError() ABSL_LOCKS_EXCLUDED(comm_mu_);
  absl::Status Fail(absl::Status status);
  // cudaSetDevice(options_.device) on the calling thread.
  absl::Status MakeDeviceCurrent();
  // health(), then MakeDeviceCurrent(): before every collective.
  absl::Status ReadyOnThisThread();
  absl::Status Prefix(absl::Status status) const;
  void Count(CollectiveKind kind, int64_t sent, int64_t received);

  const NcclCommunicatorOptions options_;
  // Collectives come from one thread, waits from any; an abort takes the
  // communicator away from all of them at once, and only once.
  absl::Mutex comm_mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(comm_mu_) = nullptr;
  mutable absl::Mutex mu_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  ByteCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_NCCL_COMMUNICATOR_H_
