#ifndef CORESCAPE_RUNTIME_DEVICE_CPU_DEVICE_RUNTIME_H_
#define CORESCAPE_RUNTIME_DEVICE_CPU_DEVICE_RUNTIME_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/device/device_runtime.h"

namespace corescape::device {

// The CPU as a device: "device" memory is host memory, a stream runs each
// piece of work when it is submitted (so submission order is completion
// order and an event is complete once recorded), copies are memcpy. Frees of
// pointers it did not hand out are refused, not undefined.
class CpuDeviceRuntime final : public DeviceRuntime {
 public:
  // Larger single requests are refused (RESOURCE_EXHAUSTED) before malloc.
  static constexpr size_t kMaxAllocationBytes = size_t{1} << 40;

  // `capacity_bytes` > 0: device memory is limited to that many bytes live
  // at once, as a GPU's is (beyond it: RESOURCE_EXHAUSTED); 0: host memory.
  explicit CpuDeviceRuntime(size_t capacity_bytes = 0) : capacity_bytes_(capacity_bytes) {}

  Device device() const override { return Device::Cpu(); }
  absl::StatusOr<DeviceInfo> Info() override;
  absl::StatusOr<void*> AllocateDevice(size_t bytes) override;
  absl::Status FreeDevice(void* ptr) override;
  absl::StatusOr<void*> AllocatePinnedHost(size_t bytes) override;
  absl::Status FreePinnedHost(void* ptr) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override;
  absl::StatusOr<float> ElapsedMilliseconds(Event& start, Event& end) override;
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                         Stream& stream) override;
  absl::Status Synchronize() override { return absl::OkStatus(); }

 private:
  using Blocks = absl::flat_hash_map<void*, size_t>;  // block -> bytes
  absl::StatusOr<void*> Allocate(size_t bytes, Blocks& live, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Free(void* ptr, Blocks& live, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t capacity_bytes_;
  absl::Mutex mu_;
  Blocks device_blocks_ ABSL_GUARDED_BY(mu_);
  Blocks pinned_blocks_ ABSL_GUARDED_BY(mu_);
  size_t device_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace corescape::device

#endif  // CORESCAPE_RUNTIME_DEVICE_CPU_DEVICE_RUNTIME_H_
