#ifndef CORESCAPE_RUNTIME_DEVICE_CUDA_STATUS_H_
#define CORESCAPE_RUNTIME_DEVICE_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace corescape::device {

// A CUDA runtime result as a status naming the call that returned it, e.g.
// "cudaMalloc(1048576 bytes): out of memory (cudaErrorMemoryAllocation)".
// Out of memory is RESOURCE_EXHAUSTED, bad arguments INVALID_ARGUMENT, a
// missing device or driver FAILED_PRECONDITION, the rest INTERNAL.
absl::Status CudaStatus(cudaError_t error, const char* call);
absl::Status CudaStatus(cudaError_t error, const char* call, const char* detail);

}  // namespace corescape::device

#endif  // CORESCAPE_RUNTIME_DEVICE_CUDA_STATUS_H_
