#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_MASK_BITS_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_MASK_BITS_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace corescape::kernels::cuda {

// flags[range] (0/1 bytes) -> MaskWords(range) words, and back.
absl::Status LaunchPackMask(const uint8_t* flags, int64_t range, uint32_t* words, cudaStream_t stream);
absl::Status LaunchUnpackMask(const uint32_t* words, int64_t range, uint8_t* flags, cudaStream_t stream);
// The words of [begin, begin + range) with exactly the bits of `indices`
// (absolute coordinates inside that range) set.
absl::Status LaunchSetMaskBits(const int64_t* indices, int64_t count, int64_t begin, int64_t range,
                               uint32_t* words, cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_MASK_BITS_CUDA_H_
