#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_ROPE_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_ROPE_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace corescape::kernels::cuda {

// As RopeForward / RopeBackward (runtime/kernels/cpu/rope.h), in place on
// x[rows, heads, head_dim]; direction +1 forward, −1 backward.
absl::Status LaunchRope(float* x, const int32_t* positions, int64_t rows, int heads, int head_dim,
                        double theta, double direction, cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_ROPE_CUDA_H_
