#ifndef CORESCAPE_RUNTIME_DEVICE_DEVICE_RUNTIME_H_
#define CORESCAPE_RUNTIME_DEVICE_DEVICE_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/device/device.h"

namespace corescape::device {

// A small API in NCCL's spirit: a runtime per device that hands out raw
// device memory, pinned host memory, streams and events, and copies bytes.
// Two implementations: the CPU (always built; streams run work at once, in
// submission order, so every "async" call has finished when it returns) and
// CUDA (only under --config=cuda). Every call that can fail returns a status;
// CUDA errors name the CUDA call that failed.

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

class Stream;

// A point in a stream's work. Record places it after everything submitted
// to that stream so far; a never-recorded event counts as complete.
class Event {
 public:
  virtual ~Event() = default;
  // True once all work before the recording has finished.
  virtual absl::StatusOr<bool> Query() = 0;
  // Blocks the host until then.
  virtual absl::Status Synchronize() = 0;
};

// An ordered queue of device work.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual absl::Status Record(Event& event) = 0;
  // Work submitted to this stream later starts only after `event` completed.
  virtual absl::Status Wait(Event& event) = 0;
  // Runs `fn` on a host thread once the stream's earlier work is done; later
  // work waits for it. `fn` must not call back into the device runtime.
  virtual absl::Status EnqueueHost(absl::AnyInvocable<void() &&> fn) = 0;
  // Blocks the host until all submitted work has finished.
  virtual absl::Status Synchronize() = 0;
  // cudaStream_t under CUDA (what kernel launches take); nullptr on the CPU.
  virtual void* native_handle() = 0;
};

struct DeviceInfo {
  std::string name;          // e.g. "NVIDIA H200", or "cpu"
  int64_t total_bytes = 0;   // device memory (host memory for the CPU)
  int64_t free_bytes = 0;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual Device device() const = 0;
  virtual absl::StatusOr<DeviceInfo> Info() = 0;

  // Uncached device memory (CachingAllocator keeps it): 256-byte aligned.
  // Zero bytes gives nullptr.
  virtual absl::StatusOr<void*> AllocateDevice(size_t bytes) = 0;
  virtual absl::Status FreeDevice(void* ptr) = 0;
  // Page-locked host memory, so host<->device copies run asynchronously.
  virtual absl::StatusOr<void*> AllocatePinnedHost(size_t bytes) = 0;
  virtual absl::Status FreePinnedHost(void* ptr) = 0;

  virtual absl::StatusOr<std::unique_ptr<Stream>> CreateStream() = 0;
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent() = 0;
  // Milliseconds between two recorded, completed events.
  virtual absl::StatusOr<float> ElapsedMilliseconds(Event& start, Event& end) = 0;

  // Copies `bytes` in stream order. Refused (INVALID_ARGUMENT): null
  // pointers with bytes > 0, overlapping ranges, a stream of another runtime.
  virtual absl::Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                                 Stream& stream) = 0;
  // Waits for every stream of this device.
  virtual absl::Status Synchronize() = 0;
};

// The runtime of `device`. A CUDA device in a binary built without
// --config=cuda, or one this machine does not have, is FAILED_PRECONDITION
// with a message saying which.
absl::StatusOr<std::unique_ptr<DeviceRuntime>> OpenDevice(const Device& device);

// Whether this binary was built with CUDA (--config=cuda).
bool CudaCompiledIn();

// The checks every CopyAsync makes before touching memory.
absl::Status ValidateCopy(const void* dst, const void* src, size_t bytes);

// Pinned host memory owned by a runtime; freed when destroyed.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  static absl::StatusOr<PinnedHostBuffer> Allocate(DeviceRuntime* runtime, size_t bytes);
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept { *this = std::move(other); }
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;
  ~PinnedHostBuffer() { Reset(); }

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  void Reset();
  DeviceRuntime* runtime_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace corescape::device

#endif  // CORESCAPE_RUNTIME_DEVICE_DEVICE_RUNTIME_H_
