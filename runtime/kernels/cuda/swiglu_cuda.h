#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_SWIGLU_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_SWIGLU_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace corescape::kernels::cuda {

// As SwiGluForward / SwiGluBackward (runtime/kernels/cpu/swiglu.h).
absl::Status LaunchSwiGluForward(const float* gate, const float* up, float* h, int64_t n, cudaStream_t stream);
absl::Status LaunchSwiGluBackward(const float* gate, const float* up, const float* d_h, float* d_gate,
                                  float* d_up, int64_t n, cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_SWIGLU_CUDA_H_
