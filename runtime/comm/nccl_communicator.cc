#include "runtime/comm/nccl_communicator.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "runtime/comm/block_layout.h"

namespace corescape::comm {
namespace {

constexpr absl::Duration kPollInterval = absl::Microseconds(50);

ncclRedOp_t ToNccl(ReduceOp op) { return op == ReduceOp::kMean ? ncclAvg : ncclSum; }

bool AllEqual(absl::Span<const int64_t> sizes) {
  for (int64_t s : sizes) {
    if (s != sizes[0]) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> CreateNcclUniqueId() {
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
    return absl::UnavailableError(absl::StrCat("ncclGetUniqueId: ", ncclGetErrorString(r)));
  }
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const NcclCommunicatorOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", options.rank, " outside world size ",
                                                   options.world_size));
  }
  if (options.unique_id.size() != NCCL_UNIQUE_ID_BYTES) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique id must be ",
                                                   NCCL_UNIQUE_ID_BYTES, " bytes, got ",
                                                   options.unique_id.size()));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive");
  }
  std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(options));
  if (absl::Status s = c->Init(); !s.ok()) return s;
  return c;
}

NcclCommunicator::NcclCommunicator(const NcclCommunicatorOptions& options)
    : options_(options) {}

absl::Status NcclCommunicator::Prefix(absl::Status status) const {
  return absl::Status(status.code(),
                      absl::StrCat("job '", options_.job_id, "' generation ", options_.generation,
                                   " NCCL rank ", options_.rank, "/", options_.world_size, ": ",
                                   status.message()));
}

absl::Status NcclCommunicator::Init() {
  if (absl::Status s = MakeDeviceCurrent(); !s.ok()) return s;
  ncclUniqueId id;
  std::memcpy(id.internal, options_.unique_id.data(), NCCL_UNIQUE_ID_BYTES);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // so a missing peer cannot hang initialisation
  ncclComm_t comm = nullptr;
  const ncclResult_t r =
      ncclCommInitRankConfig(&comm, options_.world_size, id, options_.rank, &config);
  {
    absl::MutexLock lock(&comm_mu_);
    comm_ = comm;
  }
  return Check(r, "ncclCommInitRankConfig");
}

NcclCommunicator::~NcclCommunicator() {
  ncclComm_t comm;
  {
    absl::MutexLock lock(&comm_mu_);
    comm = std::exchange(comm_, nullptr);
  }
  if (comm == nullptr) return;
  if (health().ok()) {
    ncclCommFinalize(comm);
    ncclResult_t state = ncclInProgress;
    const absl::Time deadline = absl::Now() + options_.timeout;
    while (state == ncclInProgress && absl::Now() < deadline) {
      ncclCommGetAsyncError(comm, &state);
      absl::SleepFor(kPollInterval);
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm);
      return;
    }
  }
  ncclCommAbort(comm);
}

absl::Status NcclCommunicator::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (broken_.ok()) {
      broken_ = Prefix(status);
      LOG(ERROR) << broken_.message();
    }
    status = broken_;  // the first error wins (an Abort's, if it came first)
  }
  // Taken under the writer lock: no other thread is inside a call on it,
  // none gets it after, and a second failure finds nothing to abort.
  ncclComm_t comm;
  {
    absl::MutexLock lock(&comm_mu_);
    comm = std::exchange(comm_, nullptr);
  }
  if (comm != nullptr) ncclCommAbort(comm);
  return status;
}

template <typename Call>
ncclResult_t NcclCommunicator::WithComm(Call call) {
  absl::ReaderMutexLock lock(&comm_mu_);
  if (comm_ == nullptr) return ncclInvalidUsage;
  return call(comm_);
}

ncclResult_t NcclCommunicator::AsyncError() {
  ncclResult_t state = ncclSuccess;
  const ncclResult_t read = WithComm([&](ncclComm_t comm) { return ncclCommGetAsyncError(comm, &state); });
  return read == ncclSuccess ? state : read;
}

void NcclCommunicator::Abort(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (broken_.ok()) broken_ = Prefix(absl::CancelledError(absl::StrCat("aborted: ", reason)));
}

absl::Status NcclCommunicator::Check(ncclResult_t result, const char* what) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (result == ncclInProgress) {
    // A stopped job does not sit out a connection to a dead peer.
    if (absl::Status s = health(); !s.ok()) return Fail(s);
    if (absl::Now() > deadline) {
      return Fail(absl::DeadlineExceededError(
          absl::StrCat(what, " did not complete within ", absl::FormatDuration(options_.timeout),
                       " (a peer is dead, stalled or missing)")));
    }
    absl::SleepFor(kPollInterval);
    result = AsyncError();
  }
  if (result != ncclSuccess) {
    std::string detail;
    WithComm([&](ncclComm_t comm) {
      const char* last = ncclGetLastError(comm);
      if (last != nullptr) detail = last;
      return ncclSuccess;
    });
    return Fail(absl::UnavailableError(
        absl::StrCat(what, ": ", ncclGetErrorString(result), " (", detail, ")")));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::health() const {
  absl::MutexLock lock(&mu_);
  return broken_;
}

ByteCounters NcclCommunicator::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

void NcclCommunicator::Count(CollectiveKind kind, int64_t sent, int64_t received) {
  absl::MutexLock lock(&mu_);
  counters_[kind].bytes_sent += sent;
  counters_[kind].bytes_received += received;
  ++counters_[kind].operations;
}

absl::Status NcclCommunicator::AllReduce(float* data, int64_t count, ReduceOp op,
                                         cudaStream_t stream) {
  if (absl::Status s = ReadyOnThisThread(); !s.ok()) return s;
  if (count < 0) return absl::InvalidArgumentError("negative count");
  if (count == 0) return absl::OkStatus();
  if (absl::Status s = Check(WithComm([&](ncclComm_t comm) {
                               return ncclAllReduce(data, data, count, ncclFloat, ToNccl(op), comm, stream);
                             }),
                             "ncclAllReduce");
      !s.ok()) {
    return s;
  }
  const int p = world_size();
  const BlockLayout chunks = BlockLayout::Balanced(count, p, sizeof(float));
  const int r = rank();
  const int64_t n = count * 4;
  if (p > 1) {
    Count(CollectiveKind::kAllReduce, 2 * n - chunks.bytes[r] - chunks.bytes[(r + 1) % p],
          2 * n - chunks.bytes[r] - chunks.bytes[(r + p - 1) % p]);
  } else {
    Count(CollectiveKind::kAllReduce, 0, 0);
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::AllGatherV(const void* send, int64_t send_bytes, void* recv,
                                          absl::Span<const int64_t> recv_bytes_per_rank,
                                          cudaStream_t stream) {
  if (absl::Status s = ReadyOnThisThread(); !s.ok()) return s;
  const int p = world_size();
  const int r = rank();
  if (static_cast<int>(recv_bytes_per_rank.size()) != p || send_bytes != recv_bytes_per_rank[r]) {
    return absl::InvalidArgumentError("recv_bytes_per_rank must have world_size entries and "
                                      "recv_bytes_per_rank[rank] == send_bytes");
  }
  absl::StatusOr<BlockLayout> layout = BlockLayout::FromSizes(recv_bytes_per_rank);
  if (!layout.ok()) return layout.status();
  char* out = static_cast<char*>(recv);
  const ncclResult_t result = WithComm([&](ncclComm_t comm) {
    if (AllEqual(recv_bytes_per_rank)) return ncclAllGather(send, out, send_bytes, ncclChar, comm, stream);
    // Every rank broadcasts its own block: one NCCL group, one launch.
    ncclResult_t issued = ncclGroupStart();
    for (int root = 0; root < p && issued == ncclSuccess; ++root) {
      if (layout->bytes[root] == 0) continue;
      issued = ncclBroadcast(root == r ? send : out + layout->offset[root], out + layout->offset[root],
                             layout->bytes[root], ncclChar, root, comm, stream);
    }
    const ncclResult_t end = ncclGroupEnd();
    return issued == ncclSuccess ? end : issued;
  });
  if (absl::Status s = Check(result, "all-gather-v"); !s.ok()) return s;
  const int64_t total = layout->total_bytes();
  Count(CollectiveKind::kAllGather, p > 1 ? total - layout->bytes[(r + 1) % p] : 0,
        total - layout->bytes[r]);
  return absl::OkStatus();
}

absl::Status NcclCommunicator::ReduceScatter(const float* send, float* recv,
                                             absl::Span<const int64_t> counts_per_rank,
                                             ReduceOp op, cudaStream_t stream) {
  if (absl::Status s = ReadyOnThisThread(); !s.ok()) return s;
  const int p = world_size();
  const int r = rank();
  if (static_cast<int>(counts_per_rank.size()) != p) {
    return absl::InvalidArgumentError("counts_per_rank must have world_size entries");
  }
  absl::StatusOr<BlockLayout> layout = BlockLayout::FromSizes(counts_per_rank, sizeof(float));
  if (!layout.ok()) return layout.status();
  const ncclResult_t result = WithComm([&](ncclComm_t comm) {
    if (AllEqual(counts_per_rank)) {
      return ncclReduceScatter(send, recv, counts_per_rank[0], ncclFloat, ToNccl(op), comm, stream);
    }
    // Block b is reduced onto rank b.
    ncclResult_t issued = ncclGroupStart();
    const char* in = reinterpret_cast<const char*>(send);
    for (int root = 0; root < p && issued == ncclSuccess; ++root) {
      if (counts_per_rank[root] == 0) continue;
      issued = ncclReduce(in + layout->offset[root], root == r ? recv : nullptr, counts_per_rank[root],
                          ncclFloat, ToNccl(op), root, comm, stream);
    }
    const ncclResult_t end = ncclGroupEnd();
    return issued == ncclSuccess ? end : issued;
  });
  if (absl::Status s = Check(result, "reduce-scatter"); !s.ok()) return s;
  const int64_t total = layout->total_bytes();
  Count(CollectiveKind::kReduceScatter, p > 1 ? total - layout->bytes[r] : 0,
        p > 1 ? total - layout->bytes[(r + p - 1) % p] : 0);
  return absl::OkStatus();
}

absl::Status NcclCommunicator::Broadcast(void* data, int64_t bytes, int root,
                                         cudaStream_t stream) {
  if (absl::Status s = ReadyOnThisThread(); !s.ok()) return s;
  if (root < 0 || root >= world_size() || bytes < 0) {
    return absl::InvalidArgumentError("bad root or size");
  }
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = Check(WithComm([&](ncclComm_t comm) {
                               return ncclBroadcast(data, data, bytes, ncclChar, root, comm, stream);
                             }),
                             "ncclBroadcast");
      !s.ok()) {
    return s;
  }
  const int p = world_size();
  const int position = (rank() - root + p) % p;
  Count(CollectiveKind::kBroadcast, position < p - 1 ? bytes : 0, position == 0 ? 0 : bytes);
  return absl::OkStatus();
}

absl::Status NcclCommunicator::MakeDeviceCurrent() {
  // The current device is per thread: a collective or a wait on another
  // thread than the one that made the communicator (a mask exchange's)
  // would otherwise run from GPU 0, starting a context there.
  if (options_.device < 0) return absl::OkStatus();
  if (cudaError_t e = cudaSetDevice(options_.device); e != cudaSuccess) {
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("cudaSetDevice(", options_.device, "): ", cudaGetErrorString(e))));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::ReadyOnThisThread() {
  if (absl::Status s = health(); !s.ok()) return s;
  return MakeDeviceCurrent();
}

absl::Status NcclCommunicator::Synchronize(cudaStream_t stream) {
  if (absl::Status s = MakeDeviceCurrent(); !s.ok()) return s;
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    if (absl::Status s = health(); !s.ok()) return Fail(s);
    const cudaError_t e = cudaStreamQuery(stream);
    if (e != cudaSuccess && e != cudaErrorNotReady) {
      return Fail(absl::InternalError(absl::StrCat("CUDA: ", cudaGetErrorString(e))));
    }
    // Read after the stream finished too: NCCL may report an error whose
    // kernels still ran to their end.
    const ncclResult_t async = AsyncError();
    if (async != ncclSuccess && async != ncclInProgress) {
      return Fail(absl::UnavailableError(absl::StrCat("NCCL: ", ncclGetErrorString(async))));
    }
    if (e == cudaSuccess && async == ncclSuccess) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "NCCL operations did not finish within ", absl::FormatDuration(options_.timeout),
          " (a peer is dead or stalled); communicator aborted")));
    }
    absl::SleepFor(kPollInterval);
  }
}

}  // namespace corescape::comm
