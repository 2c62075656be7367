#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "runtime/kernels/cuda/launch_util.cuh"
#include "runtime/kernels/cuda/topk.h"
#include "runtime/kernels/cuda/topk_cuda.h"

namespace corescape::kernels::cuda {

using host_device::PlanTopKSegments;
using host_device::TopKBy;
using host_device::TopKChooseBin;
using host_device::TopKDigit;
using host_device::TopKOrderKey;
using host_device::TopKPrefixMatches;
using host_device::TopKRadixState;
using host_device::TopKSegment;
using host_device::TopKSegmentOfTile;
using host_device::TopKSegmentPlan;
using host_device::TopKTaken;
using host_device::kTopKRadixBins;
using host_device::kTopKRadixPasses;

namespace {

// The ordered take pass: a block of kThreads threads per tile, each thread
// kItemsPerThread consecutive entries.
constexpr int kItemsPerThread = 8;
constexpr int64_t kTile = int64_t{kThreads} * kItemsPerThread;

// Every launch below but the choice runs a block per tile; a tile lies in
// one segment. Where this block's tile lies: its segment and its first
// entry's offset inside the segment.
struct TileOfBlock {
  int segment;
  int64_t first;
};

__device__ TileOfBlock FindTile(const TopKSegmentPlan* plan, int segments) {
  const int64_t tile = blockIdx.x;
  const int s = TopKSegmentOfTile(plan, segments, tile);
  return TileOfBlock{s, (tile - plan[s].first_tile) * kTile};
}

// A block per segment: its state starts at (no digits, k to take), its
// histogram cleared.
__global__ void StartKernel(const TopKSegmentPlan* plan, TopKRadixState* state,
                            unsigned long long* histogram) {
  const int s = blockIdx.x;
  if (threadIdx.x == 0) state[s] = TopKRadixState{0u, plan[s].k};
  for (int bin = threadIdx.x; bin < kTopKRadixBins; bin += blockDim.x) {
    histogram[int64_t{s} * kTopKRadixBins + bin] = 0;
  }
}

// Pass `pass`'s digits of the tile's keys that share the digits found so
// far in their segment, into the segment's histogram.
__global__ void HistogramKernel(const float* statistic, const TopKSegmentPlan* plan, int segments,
                                TopKBy by, int pass, const TopKRadixState* state,
                                unsigned long long* histogram) {
  __shared__ unsigned int local[kTopKRadixBins];
  for (int bin = threadIdx.x; bin < kTopKRadixBins; bin += blockDim.x) local[bin] = 0;
  __syncthreads();
  const TileOfBlock tile = FindTile(plan, segments);
  const TopKSegmentPlan& segment = plan[tile.segment];
  const uint32_t prefix = state[tile.segment].prefix;
  const int64_t end = tile.first + kTile < segment.numel ? tile.first + kTile : segment.numel;
  for (int64_t i = tile.first + threadIdx.x; i < end; i += blockDim.x) {
    const uint32_t key = TopKOrderKey(statistic[segment.offset + i], by);
    if (TopKPrefixMatches(key, prefix, pass)) atomicAdd(&local[TopKDigit(key, pass)], 1u);
  }
  __syncthreads();
  unsigned long long* out = histogram + int64_t{tile.segment} * kTopKRadixBins;
  for (int bin = threadIdx.x; bin < kTopKRadixBins; bin += blockDim.x) {
    if (local[bin] != 0) atomicAdd(&out[bin], static_cast<unsigned long long>(local[bin]));
  }
}

// A block per segment: the bin holding its k-th joins its prefix; its
// histogram is cleared for the next pass.
__global__ void ChooseKernel(int pass, TopKRadixState* state, unsigned long long* histogram) {
  unsigned long long* own = histogram + int64_t{blockIdx.x} * kTopKRadixBins;
  if (threadIdx.x == 0) TopKChooseBin(own, pass, state[blockIdx.x]);
  __syncthreads();
  for (int bin = threadIdx.x; bin < kTopKRadixBins; bin += blockDim.x) own[bin] = 0;
}

// Per tile: its keys above its segment's T and equal to it.
__global__ void TileCountsKernel(const float* statistic, const TopKSegmentPlan* plan,
                                 int segments, TopKBy by, const TopKRadixState* state,
                                 int64_t* greater, int64_t* equal) {
  using Reduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const TileOfBlock tile = FindTile(plan, segments);
  const TopKSegmentPlan& segment = plan[tile.segment];
  const uint32_t threshold = state[tile.segment].prefix;
  const int64_t end = tile.first + kTile < segment.numel ? tile.first + kTile : segment.numel;
  int64_t above = 0, same = 0;
  for (int64_t i = tile.first + threadIdx.x; i < end; i += blockDim.x) {
    const uint32_t key = TopKOrderKey(statistic[segment.offset + i], by);
    above += key > threshold;
    same += key == threshold;
  }
  const int64_t tile_above = Reduce(storage).Sum(above);
  __syncthreads();
  const int64_t tile_same = Reduce(storage).Sum(same);
  if (threadIdx.x == 0) {
    greater[blockIdx.x] = tile_above;
    equal[blockIdx.x] = tile_same;
  }
}

// Per tile, in index order: every key above its segment's T and the first
// `remaining` keys equal to it, each at the count of those its segment took
// before it (the scans run over every tile: a segment's first tile's value
// is subtracted).
__global__ void TakeKernel(const float* statistic, const TopKSegmentPlan* plan, int segments,
                           int64_t begin, TopKBy by, const TopKRadixState* state,
                           const int64_t* greater_before_tile, const int64_t* equal_before_tile,
                           int64_t* out) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage storage;
  const TileOfBlock tile = FindTile(plan, segments);
  const TopKSegmentPlan& segment = plan[tile.segment];
  const uint32_t threshold = state[tile.segment].prefix;
  const int64_t remaining = state[tile.segment].remaining;
  const int64_t first = tile.first + int64_t{threadIdx.x} * kItemsPerThread;
  uint32_t keys[kItemsPerThread];
  int64_t above = 0, same = 0;
  for (int j = 0; j < kItemsPerThread; ++j) {
    const int64_t i = first + j;
    keys[j] = i < segment.numel ? TopKOrderKey(statistic[segment.offset + i], by) : 0u;
    if (i < segment.numel) {
      above += keys[j] > threshold;
      same += keys[j] == threshold;
    }
  }
  int64_t greater_before = 0, equal_before = 0;
  Scan(storage).ExclusiveSum(above, greater_before);
  __syncthreads();
  Scan(storage).ExclusiveSum(same, equal_before);
  greater_before += greater_before_tile[blockIdx.x] - greater_before_tile[segment.first_tile];
  equal_before += equal_before_tile[blockIdx.x] - equal_before_tile[segment.first_tile];
  int64_t* segment_out = out + segment.out_begin;
  for (int j = 0; j < kItemsPerThread && first + j < segment.numel; ++j) {
    if (TopKTaken(keys[j], threshold, equal_before, remaining)) {
      segment_out[greater_before + (equal_before < remaining ? equal_before : remaining)] =
          begin + segment.offset + first + j;
    }
    greater_before += keys[j] > threshold;
    equal_before += keys[j] == threshold;
  }
}

size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The launches' view of the segments, and their scratch: the plans, a state
// and a histogram per segment, per-tile counts and their scans (two each),
// CUB's scan storage.
struct Layout {
  std::vector<TopKSegmentPlan> plans;
  int64_t tiles = 0;
  size_t plan, state, histogram, counts, cub, total;
};

absl::StatusOr<Layout> LayoutFor(absl::Span<const TopKSegment> segments) {
  constexpr int64_t kMaxEntries = (int64_t{1} << 31) - 1;
  if (segments.size() > static_cast<size_t>(kMaxEntries)) {
    return absl::InvalidArgumentError(absl::StrCat("top-k: ", segments.size(), " segments"));
  }
  for (size_t s = 0; s < segments.size(); ++s) {
    const TopKSegment& segment = segments[s];
    if (segment.offset < 0 || segment.numel < 0 || segment.numel > kMaxEntries) {
      return absl::InvalidArgumentError(absl::StrCat(
          "top-k: segment ", s, " at ", segment.offset, " of ", segment.numel,
          " entries (a range of at most 2^31 − 1 at a non-negative offset)"));
    }
  }
  Layout l;
  l.plans.resize(segments.size());
  int planned = 0;
  int64_t selected = 0;
  PlanTopKSegments(segments.data(), static_cast<int>(segments.size()), kTile, l.plans.data(),
                   &planned, &l.tiles, &selected);
  l.plans.resize(planned);
  if (l.tiles > kMaxEntries) {
    return absl::InvalidArgumentError(absl::StrCat("top-k: ", l.tiles, " tiles in one launch"));
  }
  const size_t segments_planned = l.plans.empty() ? 1 : l.plans.size();
  l.plan = Aligned(segments_planned * sizeof(TopKSegmentPlan));
  l.state = Aligned(segments_planned * sizeof(TopKRadixState));
  l.histogram = Aligned(segments_planned * kTopKRadixBins * sizeof(unsigned long long));
  l.counts = Aligned(static_cast<size_t>(l.tiles > 0 ? l.tiles : 1) * sizeof(int64_t));
  size_t scan_bytes = 0;
  if (absl::Status s = device::CudaStatus(
          cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, static_cast<int64_t*>(nullptr),
                                        static_cast<int64_t*>(nullptr), static_cast<int>(l.tiles)),
          "cub::DeviceScan::ExclusiveSum (size)");
      !s.ok()) {
    return s;
  }
  l.cub = Aligned(scan_bytes > 0 ? scan_bytes : 1);
  l.total = l.plan + l.state + l.histogram + 4 * l.counts + l.cub;
  return l;
}

}  // namespace

absl::StatusOr<size_t> TopKScratchBytes(absl::Span<const TopKSegment> segments) {
  auto layout = LayoutFor(segments);
  if (!layout.ok()) return layout.status();
  return layout->total;
}

absl::StatusOr<size_t> TopKScratchBytes(int64_t n) {
  const TopKSegment whole{0, n, n};
  return TopKScratchBytes(absl::MakeConstSpan(&whole, 1));
}

absl::Status SelectTopKInSegments(const float* statistic, absl::Span<const TopKSegment> segments,
                                  int64_t begin, int64_t* out_indices, void* scratch,
                                  size_t scratch_bytes, cudaStream_t stream, TopKBy by) {
  auto layout = LayoutFor(segments);
  if (!layout.ok()) return layout.status();
  if (layout->plans.empty()) return absl::OkStatus();
  if (scratch_bytes < layout->total) {
    return absl::InvalidArgumentError(
        absl::StrCat("top-k: scratch of ", scratch_bytes, " bytes, ", layout->total, " needed"));
  }
  char* at = static_cast<char*>(scratch);
  auto take = [&at](size_t bytes) {
    char* p = at;
    at += bytes;
    return p;
  };
  auto* plan = reinterpret_cast<TopKSegmentPlan*>(take(layout->plan));
  auto* state = reinterpret_cast<TopKRadixState*>(take(layout->state));
  auto* histogram = reinterpret_cast<unsigned long long*>(take(layout->histogram));
  auto* greater = reinterpret_cast<int64_t*>(take(layout->counts));
  auto* equal = reinterpret_cast<int64_t*>(take(layout->counts));
  auto* greater_before = reinterpret_cast<int64_t*>(take(layout->counts));
  auto* equal_before = reinterpret_cast<int64_t*>(take(layout->counts));
  void* cub_temp = take(layout->cub);
  const int segments_planned = static_cast<int>(layout->plans.size());

  // Pageable source: the copy has read it by the time the call returns.
  if (absl::Status s = device::CudaStatus(
          cudaMemcpyAsync(plan, layout->plans.data(), layout->plans.size() * sizeof(TopKSegmentPlan),
                          cudaMemcpyHostToDevice, stream),
          "SelectTopKInSegments (plans)");
      !s.ok()) {
    return s;
  }
  StartKernel<<<segments_planned, kTopKRadixBins, 0, stream>>>(plan, state, histogram);
  if (absl::Status s = LaunchStatus("SelectTopKInSegments (start)"); !s.ok()) return s;
  const unsigned tiles = static_cast<unsigned>(layout->tiles);
  for (int pass = 0; pass < kTopKRadixPasses; ++pass) {
    HistogramKernel<<<tiles, kThreads, 0, stream>>>(statistic, plan, segments_planned, by, pass,
                                                    state, histogram);
    if (absl::Status s = LaunchStatus("SelectTopKInSegments (histogram)"); !s.ok()) return s;
    ChooseKernel<<<segments_planned, kTopKRadixBins, 0, stream>>>(pass, state, histogram);
    if (absl::Status s = LaunchStatus("SelectTopKInSegments (choose)"); !s.ok()) return s;
  }
  TileCountsKernel<<<tiles, kThreads, 0, stream>>>(statistic, plan, segments_planned, by, state,
                                                   greater, equal);
  if (absl::Status s = LaunchStatus("SelectTopKInSegments (tile counts)"); !s.ok()) return s;
  for (auto [in, out] : {std::pair{greater, greater_before}, std::pair{equal, equal_before}}) {
    size_t temp_bytes = layout->cub;
    if (absl::Status s = device::CudaStatus(
            cub::DeviceScan::ExclusiveSum(cub_temp, temp_bytes, in, out, static_cast<int>(tiles), stream),
            "cub::DeviceScan::ExclusiveSum");
        !s.ok()) {
      return s;
    }
  }
  TakeKernel<<<tiles, kThreads, 0, stream>>>(statistic, plan, segments_planned, begin, by, state,
                                             greater_before, equal_before, out_indices);
  return LaunchStatus("SelectTopKInSegments (take)");
}

absl::Status SelectTopKOnDevice(const float* statistic, int64_t n, int64_t begin, int64_t k,
                                int64_t* out_indices, void* scratch, size_t scratch_bytes,
                                cudaStream_t stream, TopKBy by) {
  const TopKSegment whole{0, n, k};
  return SelectTopKInSegments(statistic, absl::MakeConstSpan(&whole, 1), begin, out_indices,
                              scratch, scratch_bytes, stream, by);
}

}  // namespace corescape::kernels::cuda
