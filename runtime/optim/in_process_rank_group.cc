#include "runtime/optim/in_process_rank_group.h"

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace corescape::optim {
namespace {

int64_t RingChunk(int64_t count, int world_size, int index) {
  return count / world_size + (index < count % world_size ? 1 : 0);
}

class InProcessPending final : public PendingCollective {
 public:
  InProcessPending(InProcessHub* hub, int64_t sequence, int rank, void* out, int64_t bytes,
                   std::function<absl::Status(InProcessHub*, int64_t, int, void*, int64_t)> collect)
      : hub_(hub), sequence_(sequence), rank_(rank), out_(out), bytes_(bytes),
        collect_(std::move(collect)) {}
  ~InProcessPending() override {
    // A handle dropped unwaited still takes its share, so the operation is freed.
    if (!waited_) (void)Wait();
  }
  absl::Status Wait() override {
    if (waited_) return absl::FailedPreconditionError("collective already waited");
    waited_ = true;
    return collect_(hub_, sequence_, rank_, out_, bytes_);
  }

 private:
  InProcessHub* hub_;
  int64_t sequence_;
  int rank_;
  void* out_;
  int64_t bytes_;
  std::function<absl::Status(InProcessHub*, int64_t, int, void*, int64_t)> collect_;
  bool waited_ = false;
};

// One addition per element, first + second, never contracted (the BUILD
// file compiles this with -ffp-contract=off, like runtime/comm's kernels).
void Add(const float* first, const float* second, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = first[i] + second[i];
}

void SumRecursiveDoubling(absl::Span<const float* const> inputs, int64_t count, float* out) {
  const int world = static_cast<int>(inputs.size());
  int pow2 = 1;
  while (pow2 * 2 <= world) pow2 *= 2;
  // value[r]: what rank r < pow2 holds; partners hold equal values after
  // every round, so the lower one's buffer stands for both.
  std::vector<std::vector<float>> value(pow2, std::vector<float>(count));
  for (int r = 0; r < pow2; ++r) {
    if (r + pow2 < world) {
      Add(inputs[r], inputs[r + pow2], value[r].data(), count);  // own + folded-in
    } else {
      std::memcpy(value[r].data(), inputs[r], count * sizeof(float));
    }
  }
  for (int mask = 1; mask < pow2; mask <<= 1) {
    for (int r = 0; r < pow2; ++r) {
      if ((r & mask) != 0) continue;
      Add(value[r].data(), value[r | mask].data(), value[r].data(), count);
      value[r | mask] = value[r];
    }
  }
  std::memcpy(out, value[0].data(), count * sizeof(float));
}

void SumRing(absl::Span<const float* const> inputs, int64_t count, float* out) {
  const int world = static_cast<int>(inputs.size());
  int64_t begin = 0;
  for (int c = 0; c < world; ++c) {
    const int64_t n = RingChunk(count, world, c);
    const int first = (c + 1) % world;
    std::memcpy(out + begin, inputs[first] + begin, n * sizeof(float));
    for (int k = 2; k <= world; ++k) {
      const float* own = inputs[(c + k) % world] + begin;
      Add(out + begin, own, out + begin, n);  // arriving partial + own value
    }
    begin += n;
  }
}

}  // namespace

void SumInDataPlaneOrder(absl::Span<const float* const> inputs, int64_t count, float* out,
                         int64_t small_bytes) {
  if (count <= 0 || inputs.empty()) return;
  if (inputs.size() == 1) {
    std::memcpy(out, inputs[0], count * sizeof(float));
  } else if (count * static_cast<int64_t>(sizeof(float)) <= small_bytes) {
    SumRecursiveDoubling(inputs, count, out);
  } else {
    SumRing(inputs, count, out);
  }
}

InProcessHub::InProcessHub(int world_size) : world_size_(world_size) {}

void InProcessHub::Abort(absl::Status status) {
  absl::MutexLock lock(&mutex_);
  if (aborted_.ok()) aborted_ = std::move(status);
}

void InProcessHub::Contribute(int64_t sequence, int rank, Kind kind, std::vector<int64_t> sizes,
                              const void* data, int64_t bytes) {
  absl::MutexLock lock(&mutex_);
  Operation& op = operations_[sequence];
  if (op.arrived == 0) {
    op.kind = kind;
    op.sizes = std::move(sizes);
    op.inputs.resize(world_size_);
  } else if (op.status.ok() && (op.kind != kind || op.sizes != sizes)) {
    op.status = absl::InvalidArgumentError(absl::StrCat(
        "in-process collective #", sequence, ": rank ", rank,
        " issued a different collective (kind or sizes) than the ranks before it"));
  }
  op.inputs[rank].assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
  if (++op.arrived < world_size_ || !op.status.ok()) return;
  // Last to arrive: compute the result once, in the data plane's order.
  if (op.kind == Kind::kAllReduceSum) {
    const int64_t count = op.sizes[0];
    std::vector<const float*> inputs(world_size_);
    for (int r = 0; r < world_size_; ++r) {
      inputs[r] = reinterpret_cast<const float*>(op.inputs[r].data());
    }
    op.result.resize(count * sizeof(float));
    SumInDataPlaneOrder(inputs, count, reinterpret_cast<float*>(op.result.data()));
  } else {
    for (int r = 0; r < world_size_; ++r) {
      op.result.insert(op.result.end(), op.inputs[r].begin(), op.inputs[r].end());
    }
  }
  op.inputs.clear();
}

absl::Status InProcessHub::Collect(int64_t sequence, int rank, void* out, int64_t out_bytes) {
  absl::MutexLock lock(&mutex_);
  auto complete = [&]() ABSL_SHARED_LOCKS_REQUIRED(mutex_) {
    return !aborted_.ok() || operations_[sequence].arrived == world_size_;
  };
  mutex_.Await(absl::Condition(&complete));
  if (!aborted_.ok()) return aborted_;
  Operation& op = operations_[sequence];
  absl::Status status = op.status;
  if (status.ok() && static_cast<int64_t>(op.result.size()) != out_bytes) {
    status = absl::InternalError("in-process collective: result size mismatch");
  }
  if (status.ok()) std::memcpy(out, op.result.data(), out_bytes);
  if (++op.collected == world_size_) operations_.erase(sequence);
  return status;
}

InProcessRankGroup::InProcessRankGroup(InProcessHub* hub, int rank) : hub_(hub), rank_(rank) {}

int64_t InProcessRankGroup::RingAllReduceBytesSent(int64_t count, int world_size, int rank) {
  if (world_size <= 1) return 0;
  const int64_t floats = 2 * count - RingChunk(count, world_size, (rank + 1) % world_size) -
                         RingChunk(count, world_size, (rank + 2) % world_size);
  return floats * static_cast<int64_t>(sizeof(float));
}

int64_t InProcessRankGroup::RingAllGatherBytesSent(absl::Span<const int64_t> bytes_per_rank,
                                                   int rank) {
  const int world_size = static_cast<int>(bytes_per_rank.size());
  if (world_size <= 1) return 0;
  const int64_t total = std::accumulate(bytes_per_rank.begin(), bytes_per_rank.end(), int64_t{0});
  return total - bytes_per_rank[(rank + 1) % world_size];
}

absl::Status InProcessRankGroup::AllReduceSum(float* data, int64_t count) {
  if (count < 0) return absl::InvalidArgumentError("AllReduceSum: negative count");
  const int64_t sequence = next_sequence_++;
  hub_->Contribute(sequence, rank_, InProcessHub::Kind::kAllReduceSum, {count}, data,
                   count * static_cast<int64_t>(sizeof(float)));
  bytes_sent_ += RingAllReduceBytesSent(count, world_size(), rank_);
  // Ring: what a rank receives mirrors what its predecessor sends.
  bytes_received_ += RingAllReduceBytesSent(count, world_size(),
                                            (rank_ + world_size() - 1) % world_size());
  return hub_->Collect(sequence, rank_, data, count * static_cast<int64_t>(sizeof(float)));
}

absl::StatusOr<std::unique_ptr<PendingCollective>> InProcessRankGroup::StartAllGatherV(
    const void* send, int64_t send_bytes, void* recv, absl::Span<const int64_t> bytes_per_rank) {
  if (static_cast<int>(bytes_per_rank.size()) != world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("AllGatherV: ", bytes_per_rank.size(),
                                                   " sizes for ", world_size(), " ranks"));
  }
  if (send_bytes != bytes_per_rank[rank_]) {
    return absl::InvalidArgumentError(absl::StrCat("AllGatherV: rank ", rank_, " sends ",
                                                   send_bytes, " bytes, sizes say ",
                                                   bytes_per_rank[rank_]));
  }
  const int64_t sequence = next_sequence_++;
  std::vector<int64_t> sizes(bytes_per_rank.begin(), bytes_per_rank.end());
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  hub_->Contribute(sequence, rank_, InProcessHub::Kind::kAllGatherV, sizes, send, send_bytes);
  bytes_sent_ += RingAllGatherBytesSent(sizes, rank_);
  bytes_received_ += world_size() > 1 ? total - sizes[rank_] : 0;
  return std::make_unique<InProcessPending>(
      hub_, sequence, rank_, recv, total,
      [](InProcessHub* hub, int64_t seq, int rank, void* out, int64_t bytes) {
        return hub->Collect(seq, rank, out, bytes);
      });
}

absl::Status InProcessRankGroup::AllGatherV(const void* send, int64_t send_bytes, void* recv,
                                            absl::Span<const int64_t> bytes_per_rank) {
  auto pending = StartAllGatherV(send, send_bytes, recv, bytes_per_rank);
  if (!pending.ok()) return pending.status();
  return (*pending)->Wait();
}

absl::Status RunInProcessRanks(int world_size,
                               const std::function<absl::Status(int, RankGroup&)>& body) {
  if (world_size < 1) return absl::InvalidArgumentError("world_size must be positive");
  InProcessHub hub(world_size);
  std::vector<absl::Status> statuses(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      InProcessRankGroup group(&hub, r);
      statuses[r] = body(r, group);
      if (!statuses[r].ok()) {
        hub.Abort(absl::AbortedError(absl::StrCat("rank ", r, " stopped: ",
                                                  statuses[r].message())));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // The first rank that failed on its own, not one aborted because of it.
  for (const absl::Status& s : statuses) {
    if (!s.ok() && !absl::IsAborted(s)) return s;
  }
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace corescape::optim
