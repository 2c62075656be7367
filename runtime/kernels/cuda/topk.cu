#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/cuda/launch_util.cuh"
#include "runtime/kernels/cuda/topk.h"
#include "runtime/kernels/cuda/topk_cuda.h"

namespace corescape::kernels::cuda {
namespace {

// The ordered take pass: a block of kThreads threads per tile, each thread
// kItemsPerThread consecutive entries.
constexpr int kItemsPerThread = 8;
constexpr int64_t kTile = int64_t{kThreads} * kItemsPerThread;

__global__ void StartKernel(int64_t k, TopKRadixState* state, unsigned long long* histogram) {
  if (threadIdx.x == 0) *state = TopKRadixState{0u, k};
  for (int bin = threadIdx.x; bin < kTopKRadixBins; bin += blockDim.x) histogram[bin] = 0;
}

// Pass `pass`'s digits of the keys that share the digits found so far.
__global__ void HistogramKernel(const float* statistic, int64_t n, TopKBy by, int pass,
                                const TopKRadixState* state, unsigned long long* histogram) {
  __shared__ unsigned int local[kTopKRadixBins];
  for (int bin = threadIdx.x; bin < kTopKRadixBins; bin += blockDim.x) local[bin] = 0;
  __syncthreads();
  const uint32_t prefix = state->prefix;
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    const uint32_t key = TopKOrderKey(statistic[i], by);
    if (TopKPrefixMatches(key, prefix, pass)) atomicAdd(&local[TopKDigit(key, pass)], 1u);
  }
  __syncthreads();
  for (int bin = threadIdx.x; bin < kTopKRadixBins; bin += blockDim.x) {
    if (local[bin] != 0) atomicAdd(&histogram[bin], static_cast<unsigned long long>(local[bin]));
  }
}

// One block: the bin holding the k-th joins the prefix; the histogram is
// cleared for the next pass.
__global__ void ChooseKernel(int pass, TopKRadixState* state, unsigned long long* histogram) {
  if (threadIdx.x == 0) TopKChooseBin(histogram, pass, *state);
  __syncthreads();
  for (int bin = threadIdx.x; bin < kTopKRadixBins; bin += blockDim.x) histogram[bin] = 0;
}

// Per tile: its keys above T and equal to T.
__global__ void TileCountsKernel(const float* statistic, int64_t n, TopKBy by,
                                 const TopKRadixState* state, int64_t* greater, int64_t* equal) {
  using Reduce = cub::BlockReduce<int64_t, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const uint32_t threshold = state->prefix;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kTile;
  int64_t above = 0, same = 0;
  for (int64_t i = first + threadIdx.x; i < first + kTile && i < n; i += blockDim.x) {
    const uint32_t key = TopKOrderKey(statistic[i], by);
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

// Per tile, in index order: every key above T and the first `remaining`
// keys equal to T, each at the count of those taken before it.
__global__ void TakeKernel(const float* statistic, int64_t n, int64_t begin, TopKBy by,
                           const TopKRadixState* state, const int64_t* greater_before_tile,
                           const int64_t* equal_before_tile, int64_t* out) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage storage;
  const uint32_t threshold = state->prefix;
  const int64_t remaining = state->remaining;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kTile + int64_t{threadIdx.x} * kItemsPerThread;
  uint32_t keys[kItemsPerThread];
  int64_t above = 0, same = 0;
  for (int j = 0; j < kItemsPerThread; ++j) {
    const int64_t i = first + j;
    keys[j] = i < n ? TopKOrderKey(statistic[i], by) : 0u;  // 0: below every taken key
    if (i < n) {
      above += keys[j] > threshold;
      same += keys[j] == threshold;
    }
  }
  int64_t greater_before = 0, equal_before = 0;
  Scan(storage).ExclusiveSum(above, greater_before);
  __syncthreads();
  Scan(storage).ExclusiveSum(same, equal_before);
  greater_before += greater_before_tile[blockIdx.x];
  equal_before += equal_before_tile[blockIdx.x];
  for (int j = 0; j < kItemsPerThread && first + j < n; ++j) {
    if (TopKTaken(keys[j], threshold, equal_before, remaining)) {
      out[greater_before + (equal_before < remaining ? equal_before : remaining)] = begin + first + j;
    }
    greater_before += keys[j] > threshold;
    equal_before += keys[j] == threshold;
  }
}

size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Scratch layout: the state, the histogram, per-tile counts and their
// scans (two each), CUB's scan storage.
struct Layout {
  int64_t tiles;
  size_t state, histogram, counts, cub, total;
};

absl::StatusOr<Layout> LayoutFor(int64_t n) {
  Layout l;
  l.tiles = (n + kTile - 1) / kTile;
  l.state = Aligned(sizeof(TopKRadixState));
  l.histogram = Aligned(kTopKRadixBins * sizeof(unsigned long long));
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
  l.total = l.state + l.histogram + 4 * l.counts + l.cub;
  return l;
}

}  // namespace

absl::StatusOr<size_t> TopKScratchBytes(int64_t n) {
  if (n < 0 || n > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("top-k: range of ", n, " entries (at most 2^31 − 1)"));
  }
  auto layout = LayoutFor(n);
  if (!layout.ok()) return layout.status();
  return layout->total;
}

absl::Status SelectTopKOnDevice(const float* statistic, int64_t n, int64_t begin, int64_t k,
                                int64_t* out_indices, void* scratch, size_t scratch_bytes,
                                cudaStream_t stream, TopKBy by) {
  k = k < 0 ? 0 : (k > n ? n : k);
  if (k == 0) return absl::OkStatus();
  if (n > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError(absl::StrCat("top-k: range of ", n, " entries (at most 2^31 − 1)"));
  }
  auto layout = LayoutFor(n);
  if (!layout.ok()) return layout.status();
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
  auto* state = reinterpret_cast<TopKRadixState*>(take(layout->state));
  auto* histogram = reinterpret_cast<unsigned long long*>(take(layout->histogram));
  auto* greater = reinterpret_cast<int64_t*>(take(layout->counts));
  auto* equal = reinterpret_cast<int64_t*>(take(layout->counts));
  auto* greater_before = reinterpret_cast<int64_t*>(take(layout->counts));
  auto* equal_before = reinterpret_cast<int64_t*>(take(layout->counts));
  void* cub_temp = take(layout->cub);

  StartKernel<<<1, kTopKRadixBins, 0, stream>>>(k, state, histogram);
  if (absl::Status s = LaunchStatus("SelectTopKOnDevice (start)"); !s.ok()) return s;
  for (int pass = 0; pass < kTopKRadixPasses; ++pass) {
    HistogramKernel<<<BlocksFor(n), kThreads, 0, stream>>>(statistic, n, by, pass, state, histogram);
    if (absl::Status s = LaunchStatus("SelectTopKOnDevice (histogram)"); !s.ok()) return s;
    ChooseKernel<<<1, kTopKRadixBins, 0, stream>>>(pass, state, histogram);
    if (absl::Status s = LaunchStatus("SelectTopKOnDevice (choose)"); !s.ok()) return s;
  }
  const unsigned tiles = static_cast<unsigned>(layout->tiles);
  TileCountsKernel<<<tiles, kThreads, 0, stream>>>(statistic, n, by, state, greater, equal);
  if (absl::Status s = LaunchStatus("SelectTopKOnDevice (tile counts)"); !s.ok()) return s;
  for (auto [in, out] : {std::pair{greater, greater_before}, std::pair{equal, equal_before}}) {
    size_t temp_bytes = layout->cub;
    if (absl::Status s = device::CudaStatus(
            cub::DeviceScan::ExclusiveSum(cub_temp, temp_bytes, in, out, static_cast<int>(tiles), stream),
            "cub::DeviceScan::ExclusiveSum");
        !s.ok()) {
      return s;
    }
  }
  TakeKernel<<<tiles, kThreads, 0, stream>>>(statistic, n, begin, by, state, greater_before,
                                             equal_before, out_indices);
  return LaunchStatus("SelectTopKOnDevice (take)");
}

}  // namespace corescape::kernels::cuda
