#ifndef CORESCAPE_RUNTIME_DEVICE_CACHING_ALLOCATOR_H_
#define CORESCAPE_RUNTIME_DEVICE_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/device/device_runtime.h"

namespace corescape::device {

struct AllocatorStats {
  int64_t bytes_in_use = 0;       // size classes of live buffers
  int64_t bytes_cached = 0;       // freed blocks kept for reuse
  int64_t peak_bytes_in_use = 0;  // since construction or ResetPeak
  int64_t allocations = 0;        // Allocate calls that returned memory
  int64_t cache_hits = 0;         // of those, served from a free list
  int64_t device_allocations = 0; // blocks taken from the runtime
  int64_t device_frees = 0;       // blocks given back to it
};

class CachingAllocator;

// A block of device memory from a CachingAllocator; returns it to the
// allocator's free list when destroyed. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  void* data() const { return data_; }
  size_t size() const { return size_; }  // as requested; the block may be larger
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  // Gives the block back now (what the destructor does).
  void Reset();

 private:
  friend class CachingAllocator;
  CachingAllocator* owner_ = nullptr;
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Device memory with free lists per size class, so a training step's
// allocations stop reaching cudaMalloc (which synchronizes the device) after
// the first step. Requests round up to a size class: 512 B at least, then
// four classes per power of two (at most 25% slack). A freed block is handed
// out again at once: free a buffer only when the work that uses it has
// finished or is ordered before the next user (the same stream). When the
// runtime runs out of memory, the cache is released and the request retried
// once. Thread-safe.
class CachingAllocator {
 public:
  explicit CachingAllocator(DeviceRuntime* runtime) : runtime_(runtime) {}
  // Releases the cache. Buffers still alive must not outlive the allocator.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Zero bytes gives an empty buffer. Above kMaxRequestBytes: INVALID_ARGUMENT.
  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  // Hands every cached block back to the runtime.
  absl::Status ReleaseCached();
  AllocatorStats stats() const;
  void ResetPeak();

  static constexpr size_t kMaxRequestBytes = size_t{1} << 40;
  static size_t SizeClass(size_t bytes);
  DeviceRuntime* runtime() const { return runtime_; }

 private:
  friend class DeviceBuffer;
  absl::Status Free(void* ptr);
  absl::Status ReleaseCachedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  DeviceRuntime* runtime_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<size_t, std::vector<void*>> free_lists_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<void*, size_t> live_ ABSL_GUARDED_BY(mu_);  // block -> size class
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape::device

#endif  // CORESCAPE_RUNTIME_DEVICE_CACHING_ALLOCATOR_H_
