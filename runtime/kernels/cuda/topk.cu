#include <cub/device/device_radix_sort.cuh>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/cuda/launch_util.cuh"
#include "runtime/kernels/cuda/topk.h"
#include "runtime/kernels/cuda/topk_cuda.h"

namespace corescape::kernels::cuda {
namespace {

__global__ void KeysKernel(const float* statistic, int64_t n, int64_t begin, TopKBy by, float* keys,
                           int64_t* indices) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    keys[i] = TopKKey(statistic[i], by);
    indices[i] = begin + i;
  }
}

size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Scratch layout: keys in/out (float), indices in/out (int64), CUB's own.
struct Layout {
  size_t keys, indices, cub, total;
};

absl::StatusOr<Layout> LayoutFor(int64_t n) {
  Layout l;
  l.keys = Aligned(n * sizeof(float));
  l.indices = Aligned(n * sizeof(int64_t));
  size_t pairs_bytes = 0, keys_bytes = 0;
  const int items = static_cast<int>(n);
  if (absl::Status s = device::CudaStatus(
          cub::DeviceRadixSort::SortPairsDescending(nullptr, pairs_bytes, static_cast<float*>(nullptr),
                                                    static_cast<float*>(nullptr),
                                                    static_cast<int64_t*>(nullptr),
                                                    static_cast<int64_t*>(nullptr), items),
          "cub::DeviceRadixSort::SortPairsDescending (size)");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = device::CudaStatus(
          cub::DeviceRadixSort::SortKeys(nullptr, keys_bytes, static_cast<int64_t*>(nullptr),
                                         static_cast<int64_t*>(nullptr), items),
          "cub::DeviceRadixSort::SortKeys (size)");
      !s.ok()) {
    return s;
  }
  l.cub = Aligned(pairs_bytes > keys_bytes ? pairs_bytes : keys_bytes);
  l.total = 2 * l.keys + 2 * l.indices + l.cub;
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
  char* base = static_cast<char*>(scratch);
  float* keys_in = reinterpret_cast<float*>(base);
  float* keys_out = reinterpret_cast<float*>(base + layout->keys);
  int64_t* indices_in = reinterpret_cast<int64_t*>(base + 2 * layout->keys);
  int64_t* indices_out = reinterpret_cast<int64_t*>(base + 2 * layout->keys + layout->indices);
  void* cub_temp = base + 2 * layout->keys + 2 * layout->indices;
  KeysKernel<<<BlocksFor(n), kThreads, 0, stream>>>(statistic, n, begin, by, keys_in, indices_in);
  if (absl::Status s = LaunchStatus("SelectTopKOnDevice (keys)"); !s.ok()) return s;
  size_t temp_bytes = layout->cub;
  // Stable: equal keys keep index order, so ties go to the lower index.
  if (absl::Status s = device::CudaStatus(
          cub::DeviceRadixSort::SortPairsDescending(cub_temp, temp_bytes, keys_in, keys_out, indices_in,
                                                    indices_out, static_cast<int>(n), 0, 32, stream),
          "cub::DeviceRadixSort::SortPairsDescending");
      !s.ok()) {
    return s;
  }
  temp_bytes = layout->cub;
  return device::CudaStatus(cub::DeviceRadixSort::SortKeys(cub_temp, temp_bytes, indices_out, out_indices,
                                                           static_cast<int>(k), 0, 64, stream),
                            "cub::DeviceRadixSort::SortKeys");
}

}  // namespace corescape::kernels::cuda
