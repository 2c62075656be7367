#ifndef CORESCAPE_RUNTIME_DEVICE_CUDA_DEVICE_RUNTIME_H_
#define CORESCAPE_RUNTIME_DEVICE_CUDA_DEVICE_RUNTIME_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/device/device_runtime.h"

namespace corescape::device {

// The runtime of GPU `ordinal` (built only with --config=cuda). No GPU, no
// driver, or an ordinal past the GPUs present: FAILED_PRECONDITION saying so.
absl::StatusOr<std::unique_ptr<DeviceRuntime>> OpenCudaDevice(int ordinal);

// The number of GPUs this process sees (0 without a driver).
int CudaDeviceCount();

// The cudaStream_t behind a stream of a CUDA runtime (what launches take).
inline cudaStream_t CudaStreamOf(Stream& stream) {
  return static_cast<cudaStream_t>(stream.native_handle());
}

}  // namespace corescape::device

#endif  // CORESCAPE_RUNTIME_DEVICE_CUDA_DEVICE_RUNTIME_H_
