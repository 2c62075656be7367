#include "runtime/device/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace corescape::device {

absl::Status CudaStatus(cudaError_t error, const char* call, const char* detail) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(call, detail[0] != '\0' ? "(" : "", detail,
                                           detail[0] != '\0' ? ")" : "", ": ",
                                           cudaGetErrorString(error), " (", cudaGetErrorName(error), ")");
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidResourceHandle:
      return absl::InvalidArgumentError(message);
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CudaStatus(cudaError_t error, const char* call) { return CudaStatus(error, call, ""); }

}  // namespace corescape::device
