#include "runtime/device/device_runtime.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/device/cpu_device_runtime.h"
#ifdef CORESCAPE_WITH_CUDA
#include "runtime/device/cuda_device_runtime.h"
#endif

namespace corescape::device {

bool CudaCompiledIn() {
#ifdef CORESCAPE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<DeviceRuntime>> OpenDevice(const Device& device) {
  if (device.is_cpu()) return std::unique_ptr<DeviceRuntime>(new CpuDeviceRuntime());
#ifdef CORESCAPE_WITH_CUDA
  return OpenCudaDevice(device.index);
#else
  return absl::FailedPreconditionError(absl::StrCat(
      device.ToString(), ": this binary was built without CUDA (build with --config=cuda)"));
#endif
}

absl::Status ValidateCopy(const void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("copy of ", bytes, " bytes: ",
                                                   dst == nullptr ? "destination" : "source",
                                                   " is null"));
  }
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  if (d + bytes < d || s + bytes < s) {
    return absl::InvalidArgumentError(absl::StrCat("copy of ", bytes, " bytes wraps the address space"));
  }
  if (d < s + bytes && s < d + bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy of ", bytes, " bytes: source and destination overlap"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PinnedHostBuffer> PinnedHostBuffer::Allocate(DeviceRuntime* runtime, size_t bytes) {
  auto data = runtime->AllocatePinnedHost(bytes);
  if (!data.ok()) return data.status();
  PinnedHostBuffer buffer;
  buffer.runtime_ = runtime;
  buffer.data_ = *data;
  buffer.size_ = bytes;
  return buffer;
}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    runtime_ = other.runtime_;
    data_ = other.data_;
    size_ = other.size_;
    other.runtime_ = nullptr;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void PinnedHostBuffer::Reset() {
  if (runtime_ != nullptr && data_ != nullptr) {
    if (absl::Status s = runtime_->FreePinnedHost(data_); !s.ok()) {
      LOG(ERROR) << "freeing pinned host buffer: " << s;
    }
  }
  runtime_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace corescape::device
