#include "runtime/optim/sparse_mask.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/base/deterministic_random.h"
#include "runtime/kernels/cuda/topk.h"

namespace corescape::optim {

absl::StatusOr<ParameterPartition> ParameterPartition::Balanced(int64_t total, int world_size) {
  if (world_size < 1) return absl::InvalidArgumentError("partition: world_size must be positive");
  if (total < world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition: ", total, " entries cannot give ", world_size, " ranks one each"));
  }
  ParameterPartition p;
  p.bounds_.resize(world_size + 1, 0);
  const int64_t base = total / world_size, extra = total % world_size;
  for (int r = 0; r < world_size; ++r) p.bounds_[r + 1] = p.bounds_[r] + base + (r < extra ? 1 : 0);
  return p;
}

absl::StatusOr<ParameterPartition> ParameterPartition::FromBounds(std::vector<int64_t> bounds,
                                                                 int64_t total, int world_size) {
  if (static_cast<int64_t>(bounds.size()) != static_cast<int64_t>(world_size) + 1) {
    return absl::InvalidArgumentError(absl::StrCat("partition map has ", bounds.size(),
                                                   " bounds, ", world_size, " ranks need ",
                                                   world_size + 1));
  }
  if (bounds.front() != 0 || bounds.back() != total) {
    return absl::InvalidArgumentError(absl::StrCat("partition map covers [", bounds.front(), ", ",
                                                   bounds.back(), "), the buffer is [0, ", total,
                                                   ")"));
  }
  for (int r = 0; r < world_size; ++r) {
    if (bounds[r + 1] <= bounds[r]) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition map: range of rank ", r, " is empty or reversed"));
    }
  }
  ParameterPartition p;
  p.bounds_ = std::move(bounds);
  return p;
}

absl::StatusOr<ParameterPartition> ParameterPartition::TensorAligned(
    const std::vector<int64_t>& tensor_bounds, int world_size) {
  if (world_size < 1) return absl::InvalidArgumentError("partition: world_size must be positive");
  const int64_t tensors = static_cast<int64_t>(tensor_bounds.size()) - 1;
  if (tensors < world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "partition: ", std::max<int64_t>(0, tensors), " tensors cannot give ", world_size,
        " ranks one each"));
  }
  for (int64_t i = 0; i < tensors; ++i) {
    if (tensor_bounds[i + 1] <= tensor_bounds[i] || tensor_bounds[0] != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition: tensor ", i, " is empty or the tensor bounds do not start at 0"));
    }
  }
  const int64_t total = tensor_bounds.back();
  ParameterPartition p;
  p.bounds_.assign(1, 0);
  int64_t previous = 0;  // index into tensor_bounds of the last cut
  for (int r = 1; r < world_size; ++r) {
    const long double target = static_cast<long double>(total) * r / world_size;
    // Leave at least one tensor to this rank and to each rank after it.
    const int64_t lowest = previous + 1, highest = tensors - (world_size - r);
    int64_t best = lowest;
    for (int64_t i = lowest; i <= highest; ++i) {
      if (std::fabs(tensor_bounds[i] - target) < std::fabs(tensor_bounds[best] - target)) best = i;
    }
    p.bounds_.push_back(tensor_bounds[best]);
    previous = best;
  }
  p.bounds_.push_back(total);
  return p;
}

absl::Status CheckTensorAligned(const ParameterPartition& partition,
                                const std::vector<int64_t>& tensor_bounds) {
  for (int64_t bound : partition.bounds()) {
    if (!std::binary_search(tensor_bounds.begin(), tensor_bounds.end(), bound)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "partition map bound ", bound, " cuts a tensor: per-tensor masks need each rank to own "
          "whole tensors"));
    }
  }
  return absl::OkStatus();
}

int ParameterPartition::OwnerOf(int64_t index) const {
  return static_cast<int>(std::upper_bound(bounds_.begin(), bounds_.end(), index) -
                          bounds_.begin()) - 1;
}

int64_t MaskCountForRange(int64_t range_size, double density) {
  if (range_size <= 0 || !(density > 0)) return 0;
  // Relative slack so products that are whole numbers in exact arithmetic
  // (0.1·10) do not round up to the next one.
  const long double exact = static_cast<long double>(density) * range_size;
  const int64_t k = static_cast<int64_t>(std::ceil(exact - exact * 1e-12L));
  return std::clamp<int64_t>(k, 0, range_size);
}

absl::Status DensitySchedule::Validate() const {
  if (absl::Status s = CheckDensity(start); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("density_schedule.start: ", s.message()));
  }
  if (warmup_steps < 0) return absl::InvalidArgumentError("density_schedule.warmup_steps: must not be negative");
  if (start_step < 0) return absl::InvalidArgumentError("density_schedule.start_step: must not be negative");
  return absl::OkStatus();
}

std::string DensitySchedule::ToString() const {
  return absl::StrCat("start=", start, " warmup=", warmup_steps, " from=", start_step, " shape=",
                      DensityShapeName(shape));
}

double DensitySchedule::At(int64_t step, double target) const {
  if (warmup_steps <= 0) return target;
  if (step < start_step) return start;
  const double progress = static_cast<double>(step - start_step) / warmup_steps;
  if (progress >= 1.0) return target;
  return shape == DensityShape::kLinear ? start + (target - start) * progress
                                        : start * std::pow(target / start, progress);
}

absl::Status CheckDensity(double density) {
  if (density > 0 && density <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError("must be in (0, 1]");
}

bool DenseBySchedule(int64_t step, int64_t warmup_steps, double target,
                     const DensitySchedule& schedule) {
  return target >= 1.0 || step < warmup_steps || schedule.At(step, target) >= 1.0;
}

const char* DensityShapeName(DensityShape shape) {
  return shape == DensityShape::kLinear ? "linear" : "geometric";
}

absl::StatusOr<DensityShape> ParseDensityShape(absl::string_view name) {
  for (DensityShape shape : {DensityShape::kLinear, DensityShape::kGeometric}) {
    if (name == DensityShapeName(shape)) return shape;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown density shape '", name, "' (linear, geometric)"));
}

int64_t MaskCountForTensor(int64_t numel, double density) {
  if (numel <= 0) return 0;
  // The same slack as MaskCountForRange, the other way: 0.1·10 is 1, not 0.
  const long double exact = static_cast<long double>(density) * numel;
  const int64_t k = static_cast<int64_t>(std::floor(exact + exact * 1e-12L));
  return std::clamp<int64_t>(k, 1, numel);
}

namespace {

// A key whose unsigned order is the statistic's order with NaN as −∞ and
// −0 equal to +0: the device top-k's (kernels/cuda/topk.h).
inline uint32_t OrderKey(float value) {
  return kernels::host_device::TopKOrderKey(value, kernels::host_device::TopKBy::kValue);
}

// Below this many entries a comparison selection beats two 64 Ki-bucket
// histogram passes.
constexpr int64_t kRadixSelectMinEntries = 1 << 14;

std::vector<int64_t> SelectTopKByComparison(absl::Span<const float> statistic, int64_t begin,
                                            int64_t k) {
  const int64_t n = static_cast<int64_t>(statistic.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  // A strict total order (key descending, then index ascending): the top k
  // set is unique, whatever nth_element does internally.
  auto before = [&](int64_t a, int64_t b) {
    const uint32_t ka = OrderKey(statistic[a]), kb = OrderKey(statistic[b]);
    return ka > kb || (ka == kb && a < b);
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
  order.resize(k);
  std::sort(order.begin(), order.end());
  for (int64_t& i : order) i += begin;
  return order;
}

// Below this many entries per chunk a histogram's 256 KiB outweigh the work.
constexpr int64_t kMinPooledChunkEntries = 1 << 18;

// Chunks of a range on a pool: fixed for a given range and pool, and
// results never depend on them. `min_entries` is the least a chunk is worth.
struct Chunking {
  Chunking(int64_t n, ThreadPool* pool, int64_t min_entries)
      : pool(pool),
        n(n),
        count(pool == nullptr ? 1 : std::clamp<int64_t>(n / min_entries, 1, pool->num_threads())),
        size((n + count - 1) / count) {}
  // body(chunk, its first entry, its end) for every chunk, on the pool.
  void ForEach(const std::function<void(int64_t, int64_t, int64_t)>& body) const {
    ParallelForOn(
        pool, count,
        [&](int64_t first, int64_t last) {
          for (int64_t c = first; c < last; ++c) body(c, c * size, std::min(n, (c + 1) * size));
        },
        1);
  }
  ThreadPool* pool;
  int64_t n, count, size;
};

// Radix selection of the k-th largest key: a histogram of the keys' high 16
// bits finds the bucket holding it, a histogram of that bucket's low 16 bits
// the key itself (the threshold T). One last pass in index order takes every
// entry above T and the first (lowest-index) entries equal to T until k are
// taken, each written where the taken entries before it put it, so the
// output is ascending without a sort. Each pass runs over fixed chunks of
// the range (on a pool's threads where there is one), so the result does not
// depend on how many: a chunk's counts above and equal to T (from its
// histograms) place its first taken entry.
std::vector<int64_t> SelectTopKByThreshold(absl::Span<const float> statistic, int64_t begin,
                                           int64_t k, ThreadPool* pool) {
  constexpr int64_t kBuckets = 1 << 16;
  const int64_t n = static_cast<int64_t>(statistic.size());
  const float* s = statistic.data();
  const Chunking chunking(n, pool, kMinPooledChunkEntries);
  const int64_t chunks = chunking.count;
  std::vector<std::vector<uint32_t>> histograms(chunks, std::vector<uint32_t>(kBuckets));
  std::vector<int64_t> total(kBuckets);
  // total ← the chunks' histograms summed.
  auto sum_histograms = [&] {
    std::fill(total.begin(), total.end(), 0);
    for (const std::vector<uint32_t>& h : histograms) {
      for (int64_t b = 0; b < kBuckets; ++b) total[b] += h[b];
    }
  };
  chunking.ForEach([&](int64_t c, int64_t from, int64_t to) {
    std::vector<uint32_t>& h = histograms[c];
    for (int64_t i = from; i < to; ++i) ++h[OrderKey(s[i]) >> 16];
  });
  sum_histograms();
  int64_t above = 0;  // entries with a key above the bucket being looked at
  uint32_t high = 0xFFFF;
  while (above + total[high] < k) above += total[high--];
  // The high bucket's low digits, and each chunk's entries in higher buckets.
  std::vector<int64_t> in_higher_buckets(chunks, 0);
  chunking.ForEach([&](int64_t c, int64_t from, int64_t to) {
    std::vector<uint32_t>& h = histograms[c];
    std::fill(h.begin(), h.end(), 0);
    int64_t higher = 0;
    for (int64_t i = from; i < to; ++i) {
      const uint32_t key = OrderKey(s[i]);
      const uint32_t bucket = key >> 16;
      if (bucket == high) ++h[key & 0xFFFF];
      higher += bucket > high;
    }
    in_higher_buckets[c] = higher;
  });
  sum_histograms();
  uint32_t low = 0xFFFF;
  while (above + total[low] < k) above += total[low--];
  const uint32_t threshold = (high << 16) | low;
  const int64_t remaining = k - above;  // entries equal to T to take
  // Where each chunk's taken entries start: the keys above T and equal to
  // it in the chunks before.
  std::vector<int64_t> greater_before(chunks), equal_before(chunks);
  int64_t greater = 0, equal = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    greater_before[c] = greater;
    equal_before[c] = equal;
    const std::vector<uint32_t>& h = histograms[c];
    greater += in_higher_buckets[c];
    for (uint32_t b = low + 1; b < kBuckets; ++b) greater += h[b];
    equal += h[low];
  }
  std::vector<int64_t> chosen(k);
  chunking.ForEach([&](int64_t c, int64_t from, int64_t to) {
    int64_t g = greater_before[c], e = equal_before[c];
    for (int64_t i = from; i < to; ++i) {
      const uint32_t key = OrderKey(s[i]);
      if (key > threshold) {
        chosen[g + std::min(e, remaining)] = begin + i;
        ++g;
      } else if (key == threshold) {
        if (e < remaining) chosen[g + e] = begin + i;
        ++e;
      }
    }
  });
  return chosen;
}

std::vector<int64_t> SelectTopKExactly(absl::Span<const float> statistic, int64_t begin, int64_t k,
                                       ThreadPool* pool) {
  return static_cast<int64_t>(statistic.size()) < kRadixSelectMinEntries
             ? SelectTopKByComparison(statistic, begin, k)
             : SelectTopKByThreshold(statistic, begin, k, pool);
}

// Below this many entries the radix passes alone are as quick.
constexpr int64_t kSampledGuessMinEntries = 1 << 17;

// The top k by one pass over the range instead of three: the k-th largest
// key of a sample, lowered by four standard deviations of its estimate,
// is a guess G that at least k entries reach with near certainty; every
// entry with a key ≥ G (in index order, a few more than k) is then
// selected from exactly. The true top k all reach G whenever k entries do,
// so the result is the exact selection's; nullopt when fewer than k did,
// or far more.
std::optional<std::vector<int64_t>> SelectTopKAboveSampledGuess(absl::Span<const float> statistic,
                                                                int64_t begin, int64_t k,
                                                                ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(statistic.size());
  const float* s = statistic.data();
  const int64_t samples = TopKSampleCount(n);
  std::vector<uint32_t> sample(samples);
  for (int64_t j = 0; j < samples; ++j) {
    sample[j] = OrderKey(s[TopKSamplePosition(n, samples, j)]);
  }
  const double p = static_cast<double>(k) / static_cast<double>(n);
  const double expected = static_cast<double>(samples) * p;
  const int64_t rank = std::min<int64_t>(
      samples, static_cast<int64_t>(std::ceil(expected + 4.0 * std::sqrt(expected * (1.0 - p)))) + 16);
  std::nth_element(sample.begin(), sample.begin() + (rank - 1), sample.end(),
                   std::greater<uint32_t>());
  const uint32_t guess = sample[rank - 1];

  // Each chunk's entries reaching the guess, in index order: a block's
  // comparisons (a loop the compiler vectorizes) packed into a bit mask,
  // then its set bits taken. Where far more than k reach it (a tie at the
  // guess: e.g. a run of zeros, untouched rows of an embedding) keeping
  // them would cost more memory than the radix passes: past `most` kept,
  // counted across chunks every kReportBlocks blocks, every chunk stops.
  constexpr int64_t kBlock = 64;
  constexpr int64_t kReportBlocks = 64;
  const int64_t most = 2 * k + (int64_t{1} << 16);
  std::atomic<int64_t> kept{0};
  std::atomic<bool> too_many{false};
  const Chunking chunking(n, pool, kMinPooledChunkEntries);
  std::vector<std::vector<int64_t>> reaching(chunking.count);
  chunking.ForEach([&](int64_t c, int64_t from, int64_t to) {
    std::vector<int64_t>& x = reaching[c];
    x.reserve(static_cast<int64_t>(static_cast<double>(to - from) * rank / samples * 1.25) + 64);
    int64_t reported = 0;
    uint8_t reaches[kBlock];
    for (int64_t block = from; block < to; block += kBlock) {
      if ((block - from) % (kBlock * kReportBlocks) == 0) {
        const int64_t now = static_cast<int64_t>(x.size());
        if (kept.fetch_add(now - reported, std::memory_order_relaxed) + (now - reported) > most ||
            too_many.load(std::memory_order_relaxed)) {
          too_many.store(true, std::memory_order_relaxed);
          return;
        }
        reported = now;
      }
      const int64_t length = std::min(kBlock, to - block);
      for (int64_t b = 0; b < length; ++b) reaches[b] = OrderKey(s[block + b]) >= guess;
      for (int64_t b = length; b < kBlock; ++b) reaches[b] = 0;
      uint64_t bits = 0;
      for (int64_t byte = 0; byte < kBlock; byte += 8) {
        uint64_t eight;
        std::memcpy(&eight, reaches + byte, 8);
        // Eight 0/1 bytes to eight bits (little-endian: byte b to bit b).
        bits |= ((eight * 0x0102040810204080ull) >> 56) << byte;
      }
      while (bits != 0) {
        x.push_back(block + std::countr_zero(bits));
        bits &= bits - 1;
      }
    }
  });
  if (too_many.load()) return std::nullopt;
  std::vector<int64_t> offsets(chunking.count + 1, 0);
  for (int64_t c = 0; c < chunking.count; ++c) {
    offsets[c + 1] = offsets[c] + static_cast<int64_t>(reaching[c].size());
  }
  const int64_t reached = offsets.back();
  if (reached < k) return std::nullopt;
  std::vector<int64_t> candidate_index(reached);
  std::vector<float> candidates(reached);
  chunking.ForEach([&](int64_t c, int64_t, int64_t) {
    int64_t at = offsets[c];
    for (int64_t i : reaching[c]) {
      candidate_index[at] = i;
      candidates[at++] = s[i];
    }
  });
  // The candidates are in index order, so ties still go to the lower index.
  std::vector<int64_t> chosen = SelectTopKExactly(candidates, 0, k, pool);
  for (int64_t& i : chosen) i = begin + candidate_index[i];
  return chosen;
}

}  // namespace

int64_t TopKSampleCount(int64_t n) { return std::min(kTopKMaxSamples, n / 16); }

int64_t TopKSamplePosition(int64_t n, int64_t samples, int64_t j) {
  // One sample in each of `samples` equal strata, at an offset hashed from
  // j: no stride lines up with a tensor's rows.
  const int64_t from = static_cast<int64_t>(static_cast<__int128>(j) * n / samples);
  const int64_t to = static_cast<int64_t>(static_cast<__int128>(j + 1) * n / samples);
  return from + static_cast<int64_t>(SplitMix64(static_cast<uint64_t>(j)).Next() %
                                     static_cast<uint64_t>(std::max<int64_t>(1, to - from)));
}

std::vector<int64_t> SelectTopK(absl::Span<const float> statistic, int64_t begin, int64_t k,
                                ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(statistic.size());
  k = std::clamp<int64_t>(k, 0, n);
  if (n >= kSampledGuessMinEntries && k > 0 && k <= n / 4) {
    if (auto chosen = SelectTopKAboveSampledGuess(statistic, begin, k, pool)) return *chosen;
  }
  return SelectTopKByRadix(statistic, begin, k, pool);
}

std::vector<int64_t> SelectTopKByRadix(absl::Span<const float> statistic, int64_t begin, int64_t k,
                                       ThreadPool* pool) {
  const int64_t n = static_cast<int64_t>(statistic.size());
  k = std::clamp<int64_t>(k, 0, n);
  if (k == 0) return {};
  if (k == n) {
    std::vector<int64_t> all(n);
    std::iota(all.begin(), all.end(), begin);
    return all;
  }
  return SelectTopKExactly(statistic, begin, k, pool);
}

int64_t MaskExchange::RangeBegin(int rank) const {
  return scope_ == MaskScope::kPartitioned ? partition_->begin(rank) : 0;
}

int64_t MaskExchange::RangeEnd(int rank) const {
  return scope_ == MaskScope::kPartitioned ? partition_->end(rank) : partition_->total();
}

MaskExchange::~MaskExchange() {
  if (receiver_.joinable()) receiver_.join();
}

absl::Status MaskExchange::Start(RankGroup& group, uint64_t mask_epoch, int64_t step,
                                 std::vector<int64_t> own_part, const GlobalMask* previous,
                                 ReceivedHook on_received) {
  if (in_flight_) return absl::FailedPreconditionError("mask exchange already in flight");
  // Change-from-previous only against the step just before, which every
  // receiver holds too.
  const bool have_previous = previous != nullptr && previous->step == step - 1 &&
                             previous->mask_epoch == mask_epoch &&
                             static_cast<int>(previous->parts.size()) == group.world_size();
  group_ = &group;
  own_part_ = std::move(own_part);
  previous_ = have_previous ? previous : nullptr;
  on_received_ = std::move(on_received);
  started_mask_epoch_ = mask_epoch;
  started_step_ = step;
  last_ = {};
  send_pending_ = true;
  // Sends on the caller's thread; a failure leaves nothing in flight.
  auto send_here = [this]() {
    absl::Status sent = Send(/*on_thread=*/false);
    if (!sent.ok()) {
      in_flight_ = false;
      previous_ = nullptr;
      on_received_ = nullptr;
    }
    return sent;
  };
  if (sending_ == MaskSending::kOnCaller) {
    if (absl::Status s = send_here(); !s.ok()) return s;
  }
  in_flight_ = true;
  try {
    receiver_ = std::thread(&MaskExchange::Run, this);
  } catch (const std::system_error&) {
    // No thread to spare: send here, and Finish receives on the caller's
    // thread.
    if (send_pending_) return send_here();
  }
  return absl::OkStatus();
}

absl::Status MaskExchange::Send(bool on_thread) {
  send_pending_ = false;
  const int rank = group_->rank();
  if (lone_rank()) {
    // Its part is the whole mask and goes nowhere: nothing is coded, the
    // part is only checked as a decoder would check it.
    const absl::Time check_start = absl::Now();
    absl::Status checked = CheckMaskPartition({RangeBegin(rank), RangeEnd(rank), own_part_});
    last_.encode_seconds = absl::ToDoubleSeconds(absl::Now() - check_start);
    last_.encoded_on_thread = on_thread;
    return checked;
  }
  MaskPartitionHeader header;
  header.mask_epoch = started_mask_epoch_;
  header.step = started_step_;
  header.rank = rank;
  const absl::Time encode_start = absl::Now();
  auto encoded = EncodeMaskPartition(header, {RangeBegin(rank), RangeEnd(rank), own_part_},
                                     previous_ != nullptr ? &previous_->parts[rank] : nullptr);
  last_.encode_seconds = absl::ToDoubleSeconds(absl::Now() - encode_start);
  last_.encoded_on_thread = on_thread;
  if (!encoded.ok()) return encoded.status();
  send_ = std::move(*encoded);
  last_.part_bytes = static_cast<int64_t>(send_.size());
  last_.encoding = static_cast<MaskEncoding>(send_[1]);
  sizes_.assign(group_->world_size(), 0);
  if (absl::Status s = group_->AllGatherInt64(last_.part_bytes, absl::MakeSpan(sizes_));
      !s.ok()) {
    return s;
  }
  recv_.assign(std::accumulate(sizes_.begin(), sizes_.end(), int64_t{0}), 0);
  auto pending = group_->StartAllGatherV(send_.data(), last_.part_bytes, recv_.data(), sizes_);
  if (!pending.ok()) return pending.status();
  pending_ = std::move(*pending);
  return absl::OkStatus();
}

void MaskExchange::Run() {
  if (send_pending_) {
    if (absl::Status s = Send(/*on_thread=*/true); !s.ok()) {
      received_ = s;
      return;
    }
  }
  Receive();
}

void MaskExchange::Receive() {
  absl::Time decode_start;
  if (lone_rank()) {
    decode_start = absl::Now();
    GlobalMask mask{started_mask_epoch_, started_step_, {}, own_part_};
    mask.parts.push_back(std::move(own_part_));
    received_ = std::move(mask);
  } else {
    absl::Status waited = pending_->Wait();
    pending_.reset();
    if (!waited.ok()) {
      received_ = waited;
      return;
    }
    decode_start = absl::Now();
    std::vector<absl::string_view> parts;
    int64_t offset = 0;
    for (int64_t size : sizes_) {
      parts.emplace_back(recv_.data() + offset, size);
      offset += size;
    }
    received_ = AssembleGlobalMask(*this, parts, started_mask_epoch_, started_step_, previous_);
  }
  if (received_.ok() && on_received_) {
    if (absl::Status s = on_received_(*received_); !s.ok()) received_ = s;
  }
  last_.decode_seconds = absl::ToDoubleSeconds(absl::Now() - decode_start);
}

absl::StatusOr<GlobalMask> MaskExchange::Finish(uint64_t expected_mask_epoch,
                                                int64_t expected_step) {
  if (!in_flight_) return absl::FailedPreconditionError("no mask exchange in flight");
  last_.received_on_thread = receiver_.joinable();
  if (last_.received_on_thread) {
    receiver_.join();
  } else {
    Receive();
  }
  in_flight_ = false;
  previous_ = nullptr;
  on_received_ = nullptr;
  absl::StatusOr<GlobalMask> mask = std::move(received_);
  received_ = absl::UnknownError("no mask received");
  if (!mask.ok()) return mask.status();
  if (started_mask_epoch_ != expected_mask_epoch || started_step_ != expected_step) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mask exchange was for mask_epoch ", started_mask_epoch_, " step ", started_step_,
        ", expected mask_epoch ", expected_mask_epoch, " step ", expected_step, ": refused"));
  }
  return mask;
}

absl::StatusOr<GlobalMask> AssembleGlobalMask(const MaskExchange& ranges,
                                              absl::Span<const absl::string_view> encoded_parts,
                                              uint64_t expected_mask_epoch,
                                              int64_t expected_step,
                                              const GlobalMask* previous) {
  GlobalMask mask;
  mask.mask_epoch = expected_mask_epoch;
  mask.step = expected_step;
  const int world_size = static_cast<int>(encoded_parts.size());
  bool disjoint = true;
  for (int r = 0; r < world_size; ++r) {
    const std::vector<int64_t>* previous_part =
        previous != nullptr && static_cast<int>(previous->parts.size()) == world_size
            ? &previous->parts[r]
            : nullptr;
    auto part = DecodeMaskPartition(encoded_parts[r], ranges.RangeBegin(r), ranges.RangeEnd(r),
                                    previous_part);
    if (!part.ok()) return part.status();
    const MaskPartitionHeader& h = part->header;
    if (h.mask_epoch != expected_mask_epoch || h.step != expected_step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "mask part of rank ", r, " is for mask_epoch ", h.mask_epoch, " step ", h.step,
          ", expected mask_epoch ", expected_mask_epoch, " step ", expected_step,
          ": refused"));
    }
    if (h.rank != r) {
      return absl::FailedPreconditionError(
          absl::StrCat("mask part in slot ", r, " says it is rank ", h.rank, "'s"));
    }
    if (r > 0 && ranges.RangeBegin(r) < ranges.RangeEnd(r - 1)) disjoint = false;
    mask.parts.push_back(std::move(part->indices));
  }
  for (const std::vector<int64_t>& part : mask.parts) {
    mask.indices.insert(mask.indices.end(), part.begin(), part.end());
  }
  if (!disjoint) {  // overlapping scopes: the union, each coordinate once
    std::sort(mask.indices.begin(), mask.indices.end());
    mask.indices.erase(std::unique(mask.indices.begin(), mask.indices.end()), mask.indices.end());
  }
  return mask;
}

}  // namespace corescape::optim
