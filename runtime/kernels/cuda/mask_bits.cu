#include "runtime/kernels/cuda/launch_util.cuh"
#include "runtime/kernels/cuda/mask_bits.h"
#include "runtime/kernels/cuda/mask_bits_cuda.h"

namespace corescape::kernels::cuda {
namespace {

__global__ void PackMaskKernel(const uint8_t* flags, int64_t range, uint32_t* words) {
  const int64_t n = MaskWords(range);
  for (int64_t w = GridStart(); w < n; w += GridStride()) words[w] = PackMaskWord(flags, w, range);
}

__global__ void UnpackMaskKernel(const uint32_t* words, int64_t range, uint8_t* flags) {
  for (int64_t i = GridStart(); i < range; i += GridStride()) UnpackMaskElement(words, i, flags);
}

__global__ void SetMaskBitsKernel(const int64_t* indices, int64_t count, int64_t begin, uint32_t* words) {
  for (int64_t p = GridStart(); p < count; p += GridStride()) {
    const int64_t offset = indices[p] - begin;
    atomicOr(&words[offset / 32], 1u << (offset % 32));
  }
}

}  // namespace

absl::Status LaunchPackMask(const uint8_t* flags, int64_t range, uint32_t* words, cudaStream_t stream) {
  if (range <= 0) return absl::OkStatus();
  PackMaskKernel<<<BlocksFor(MaskWords(range)), kThreads, 0, stream>>>(flags, range, words);
  return LaunchStatus("LaunchPackMask");
}

absl::Status LaunchUnpackMask(const uint32_t* words, int64_t range, uint8_t* flags, cudaStream_t stream) {
  if (range <= 0) return absl::OkStatus();
  UnpackMaskKernel<<<BlocksFor(range), kThreads, 0, stream>>>(words, range, flags);
  return LaunchStatus("LaunchUnpackMask");
}

absl::Status LaunchSetMaskBits(const int64_t* indices, int64_t count, int64_t begin, int64_t range,
                               uint32_t* words, cudaStream_t stream) {
  if (range <= 0) return absl::OkStatus();
  if (absl::Status s = device::CudaStatus(
          cudaMemsetAsync(words, 0, MaskWords(range) * sizeof(uint32_t), stream), "cudaMemsetAsync");
      !s.ok()) {
    return s;
  }
  if (count <= 0) return absl::OkStatus();
  SetMaskBitsKernel<<<BlocksFor(count), kThreads, 0, stream>>>(indices, count, begin, words);
  return LaunchStatus("LaunchSetMaskBits");
}

}  // namespace corescape::kernels::cuda
