#ifndef CORESCAPE_RUNTIME_DEVICE_DEVICE_H_
#define CORESCAPE_RUNTIME_DEVICE_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::device {

enum class DeviceKind { kCpu, kCuda };

// Where tensors live and kernels run: the host CPU, or one CUDA GPU by its
// ordinal on this node.
struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // the GPU ordinal for kCuda; always 0 for kCpu

  static Device Cpu() { return {DeviceKind::kCpu, 0}; }
  static Device Cuda(int index) { return {DeviceKind::kCuda, index}; }

  bool is_cpu() const { return kind == DeviceKind::kCpu; }
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  // "cpu" or "cuda:N": what ParseDevice reads back.
  std::string ToString() const;
  bool operator==(const Device&) const = default;
};

// Ordinals above this are refused: no node holds more GPUs.
inline constexpr int kMaxCudaOrdinal = 255;

// "cpu", "cuda" (= cuda:0) or "cuda:N", 0 <= N <= kMaxCudaOrdinal; anything
// else is INVALID_ARGUMENT naming what is wrong with the string.
absl::StatusOr<Device> ParseDevice(absl::string_view text);

}  // namespace corescape::device

#endif  // CORESCAPE_RUNTIME_DEVICE_DEVICE_H_
