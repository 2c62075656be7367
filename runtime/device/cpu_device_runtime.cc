#include "runtime/device/cpu_device_runtime.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace corescape::device {
namespace {

constexpr size_t kAlignment = 256;  // what cudaMalloc guarantees

class CpuEvent final : public Event {
 public:
  explicit CpuEvent(const CpuDeviceRuntime* owner) : owner_(owner) {}
  absl::StatusOr<bool> Query() override { return true; }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  const CpuDeviceRuntime* owner() const { return owner_; }
  bool recorded() const { return recorded_; }
  std::chrono::steady_clock::time_point time() const { return time_; }
  void Record() {
    recorded_ = true;
    time_ = std::chrono::steady_clock::now();
  }

 private:
  const CpuDeviceRuntime* owner_;
  bool recorded_ = false;
  std::chrono::steady_clock::time_point time_;
};

class CpuStream final : public Stream {
 public:
  explicit CpuStream(const CpuDeviceRuntime* owner) : owner_(owner) {}

  absl::Status Record(Event& event) override {
    CpuEvent* e = dynamic_cast<CpuEvent*>(&event);
    if (e == nullptr || e->owner() != owner_) {
      return absl::InvalidArgumentError("stream record: the event belongs to another device runtime");
    }
    e->Record();  // all earlier work has run already
    return absl::OkStatus();
  }
  absl::Status Wait(Event& event) override {
    CpuEvent* e = dynamic_cast<CpuEvent*>(&event);
    if (e == nullptr || e->owner() != owner_) {
      return absl::InvalidArgumentError("stream wait: the event belongs to another device runtime");
    }
    return absl::OkStatus();  // complete by construction
  }
  absl::Status EnqueueHost(absl::AnyInvocable<void() &&> fn) override {
    if (!fn) return absl::InvalidArgumentError("stream: empty host function");
    std::move(fn)();
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  void* native_handle() override { return nullptr; }
  const CpuDeviceRuntime* owner() const { return owner_; }

 private:
  const CpuDeviceRuntime* owner_;
};

}  // namespace

absl::StatusOr<DeviceInfo> CpuDeviceRuntime::Info() {
  DeviceInfo info;
  info.name = "cpu";
  const long pages = sysconf(_SC_PHYS_PAGES), available = sysconf(_SC_AVPHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return absl::InternalError("cpu: sysconf reports no memory");
  info.total_bytes = static_cast<int64_t>(pages) * page_size;
  info.free_bytes = static_cast<int64_t>(available > 0 ? available : 0) * page_size;
  if (capacity_bytes_ > 0) {
    absl::MutexLock lock(&mu_);
    info.total_bytes = static_cast<int64_t>(capacity_bytes_);
    info.free_bytes = static_cast<int64_t>(capacity_bytes_ - device_bytes_);
  }
  return info;
}

absl::StatusOr<void*> CpuDeviceRuntime::Allocate(size_t bytes, Blocks& live, const char* what) {
  if (bytes == 0) return nullptr;
  if (bytes > kMaxAllocationBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": ", bytes, " bytes is above the limit of ", kMaxAllocationBytes));
  }
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory for ", bytes, " bytes"));
  }
  live[ptr] = bytes;
  return ptr;
}

absl::Status CpuDeviceRuntime::Free(void* ptr, Blocks& live, const char* what) {
  if (ptr == nullptr) return absl::OkStatus();
  auto it = live.find(ptr);
  if (it == live.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": pointer ", reinterpret_cast<uintptr_t>(ptr), " was not allocated here"));
  }
  if (&live == &device_blocks_) device_bytes_ -= it->second;
  live.erase(it);
  std::free(ptr);
  return absl::OkStatus();
}

absl::StatusOr<void*> CpuDeviceRuntime::AllocateDevice(size_t bytes) {
  absl::MutexLock lock(&mu_);
  if (capacity_bytes_ > 0 && bytes > capacity_bytes_ - device_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("cpu device allocation: ", bytes, " bytes with ",
                                                     device_bytes_, " of ", capacity_bytes_, " in use"));
  }
  auto ptr = Allocate(bytes, device_blocks_, "cpu device allocation");
  if (ptr.ok()) device_bytes_ += bytes;
  return ptr;
}

absl::Status CpuDeviceRuntime::FreeDevice(void* ptr) {
  absl::MutexLock lock(&mu_);
  return Free(ptr, device_blocks_, "cpu device free");
}

absl::StatusOr<void*> CpuDeviceRuntime::AllocatePinnedHost(size_t bytes) {
  absl::MutexLock lock(&mu_);
  return Allocate(bytes, pinned_blocks_, "cpu pinned allocation");
}

absl::Status CpuDeviceRuntime::FreePinnedHost(void* ptr) {
  absl::MutexLock lock(&mu_);
  return Free(ptr, pinned_blocks_, "cpu pinned free");
}

absl::StatusOr<std::unique_ptr<Stream>> CpuDeviceRuntime::CreateStream() {
  return std::unique_ptr<Stream>(new CpuStream(this));
}

absl::StatusOr<std::unique_ptr<Event>> CpuDeviceRuntime::CreateEvent() {
  return std::unique_ptr<Event>(new CpuEvent(this));
}

absl::StatusOr<float> CpuDeviceRuntime::ElapsedMilliseconds(Event& start, Event& end) {
  CpuEvent* a = dynamic_cast<CpuEvent*>(&start);
  CpuEvent* b = dynamic_cast<CpuEvent*>(&end);
  if (a == nullptr || b == nullptr || a->owner() != this || b->owner() != this) {
    return absl::InvalidArgumentError("elapsed time: an event belongs to another device runtime");
  }
  if (!a->recorded() || !b->recorded()) {
    return absl::FailedPreconditionError("elapsed time: both events must be recorded");
  }
  return std::chrono::duration<float, std::milli>(b->time() - a->time()).count();
}

absl::Status CpuDeviceRuntime::CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                                         Stream& stream) {
  CpuStream* s = dynamic_cast<CpuStream*>(&stream);
  if (s == nullptr || s->owner() != this) {
    return absl::InvalidArgumentError("copy: the stream belongs to another device runtime");
  }
  if (absl::Status v = ValidateCopy(dst, src, bytes); !v.ok()) return v;
  (void)kind;  // one address space
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

}  // namespace corescape::device
