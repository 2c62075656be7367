#include "runtime/device/cuda_device_runtime.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/device/cuda_status.h"

namespace corescape::device {
namespace {

class CudaDeviceRuntime;

class CudaEvent final : public Event {
 public:
  CudaEvent(const CudaDeviceRuntime* owner, cudaEvent_t event) : owner_(owner), event_(event) {}
  ~CudaEvent() override {
    if (absl::Status s = CudaStatus(cudaEventDestroy(event_), "cudaEventDestroy"); !s.ok()) {
      LOG(ERROR) << s;
    }
  }
  absl::StatusOr<bool> Query() override {
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) return false;
    if (absl::Status s = CudaStatus(e, "cudaEventQuery"); !s.ok()) return s;
    return true;
  }
  absl::Status Synchronize() override {
    return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize");
  }
  const CudaDeviceRuntime* owner() const { return owner_; }
  cudaEvent_t handle() const { return event_; }

 private:
  const CudaDeviceRuntime* owner_;
  cudaEvent_t event_;
};

class CudaStream final : public Stream {
 public:
  CudaStream(const CudaDeviceRuntime* owner, int ordinal, cudaStream_t stream)
      : owner_(owner), ordinal_(ordinal), stream_(stream) {}
  ~CudaStream() override {
    cudaSetDevice(ordinal_);
    if (absl::Status s = CudaStatus(cudaStreamDestroy(stream_), "cudaStreamDestroy"); !s.ok()) {
      LOG(ERROR) << s;
    }
  }
  absl::Status Record(Event& event) override {
    CudaEvent* e = dynamic_cast<CudaEvent*>(&event);
    if (e == nullptr || e->owner() != owner_) {
      return absl::InvalidArgumentError("stream record: the event belongs to another device runtime");
    }
    return CudaStatus(cudaEventRecord(e->handle(), stream_), "cudaEventRecord");
  }
  absl::Status Wait(Event& event) override {
    CudaEvent* e = dynamic_cast<CudaEvent*>(&event);
    if (e == nullptr) return absl::InvalidArgumentError("stream wait: not a CUDA event");
    return CudaStatus(cudaStreamWaitEvent(stream_, e->handle(), 0), "cudaStreamWaitEvent");
  }
  absl::Status EnqueueHost(absl::AnyInvocable<void() &&> fn) override {
    if (!fn) return absl::InvalidArgumentError("stream: empty host function");
    auto* boxed = new absl::AnyInvocable<void() &&>(std::move(fn));
    const cudaError_t e = cudaLaunchHostFunc(
        stream_,
        [](void* data) {
          auto* f = static_cast<absl::AnyInvocable<void() &&>*>(data);
          std::move (*f)();
          delete f;
        },
        boxed);
    if (e != cudaSuccess) delete boxed;
    return CudaStatus(e, "cudaLaunchHostFunc");
  }
  absl::Status Synchronize() override {
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void* native_handle() override { return stream_; }
  const CudaDeviceRuntime* owner() const { return owner_; }

 private:
  const CudaDeviceRuntime* owner_;
  int ordinal_;
  cudaStream_t stream_;
};

class CudaDeviceRuntime final : public DeviceRuntime {
 public:
  explicit CudaDeviceRuntime(int ordinal) : ordinal_(ordinal) {}

  Device device() const override { return Device::Cuda(ordinal_); }

  absl::StatusOr<DeviceInfo> Info() override {
    if (absl::Status s = Activate(); !s.ok()) return s;
    cudaDeviceProp prop;
    if (absl::Status s = CudaStatus(cudaGetDeviceProperties(&prop, ordinal_), "cudaGetDeviceProperties");
        !s.ok()) {
      return s;
    }
    size_t free_bytes = 0, total_bytes = 0;
    if (absl::Status s = CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"); !s.ok()) {
      return s;
    }
    return DeviceInfo{prop.name, static_cast<int64_t>(total_bytes), static_cast<int64_t>(free_bytes)};
  }

  absl::StatusOr<void*> AllocateDevice(size_t bytes) override {
    if (bytes == 0) return nullptr;
    if (absl::Status s = Activate(); !s.ok()) return s;
    void* ptr = nullptr;
    const std::string detail = absl::StrCat(bytes, " bytes");
    if (absl::Status s = CudaStatus(cudaMalloc(&ptr, bytes), "cudaMalloc", detail.c_str()); !s.ok()) {
      cudaGetLastError();  // clear the sticky-free error so later calls see their own
      return s;
    }
    return ptr;
  }
  absl::Status FreeDevice(void* ptr) override {
    if (ptr == nullptr) return absl::OkStatus();
    if (absl::Status s = Activate(); !s.ok()) return s;
    return CudaStatus(cudaFree(ptr), "cudaFree");
  }
  absl::StatusOr<void*> AllocatePinnedHost(size_t bytes) override {
    if (bytes == 0) return nullptr;
    if (absl::Status s = Activate(); !s.ok()) return s;
    void* ptr = nullptr;
    const std::string detail = absl::StrCat(bytes, " bytes");
    if (absl::Status s = CudaStatus(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable), "cudaHostAlloc",
                                    detail.c_str());
        !s.ok()) {
      cudaGetLastError();
      return s;
    }
    return ptr;
  }
  absl::Status FreePinnedHost(void* ptr) override {
    if (ptr == nullptr) return absl::OkStatus();
    return CudaStatus(cudaFreeHost(ptr), "cudaFreeHost");
  }
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override {
    if (absl::Status s = Activate(); !s.ok()) return s;
    cudaStream_t stream;
    if (absl::Status s = CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                    "cudaStreamCreateWithFlags");
        !s.ok()) {
      return s;
    }
    return std::unique_ptr<Stream>(new CudaStream(this, ordinal_, stream));
  }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    if (absl::Status s = Activate(); !s.ok()) return s;
    cudaEvent_t event;
    if (absl::Status s = CudaStatus(cudaEventCreate(&event), "cudaEventCreate"); !s.ok()) return s;
    return std::unique_ptr<Event>(new CudaEvent(this, event));
  }
  absl::StatusOr<float> ElapsedMilliseconds(Event& start, Event& end) override {
    CudaEvent* a = dynamic_cast<CudaEvent*>(&start);
    CudaEvent* b = dynamic_cast<CudaEvent*>(&end);
    if (a == nullptr || b == nullptr) return absl::InvalidArgumentError("elapsed time: not CUDA events");
    float ms = 0;
    if (absl::Status s = CudaStatus(cudaEventElapsedTime(&ms, a->handle(), b->handle()),
                                    "cudaEventElapsedTime");
        !s.ok()) {
      return s;
    }
    return ms;
  }
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                         Stream& stream) override {
    CudaStream* s = dynamic_cast<CudaStream*>(&stream);
    if (s == nullptr || s->owner() != this) {
      return absl::InvalidArgumentError("copy: the stream belongs to another device runtime");
    }
    if (absl::Status v = ValidateCopy(dst, src, bytes); !v.ok()) return v;
    if (bytes == 0) return absl::OkStatus();
    if (absl::Status a = Activate(); !a.ok()) return a;
    const cudaMemcpyKind direction = kind == CopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                                     : kind == CopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                                       : cudaMemcpyDeviceToDevice;
    const std::string detail = absl::StrCat(bytes, " bytes");
    return CudaStatus(cudaMemcpyAsync(dst, src, bytes, direction, CudaStreamOf(stream)),
                      "cudaMemcpyAsync", detail.c_str());
  }
  absl::Status Synchronize() override {
    if (absl::Status s = Activate(); !s.ok()) return s;
    return CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

 private:
  // The calling thread's current device is per thread: set it every time.
  absl::Status Activate() const { return CudaStatus(cudaSetDevice(ordinal_), "cudaSetDevice"); }
  int ordinal_;
};

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<DeviceRuntime>> OpenCudaDevice(int ordinal) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat("cuda:", ordinal, ": no usable GPU (",
                                                      cudaGetErrorString(e), ")"));
  }
  if (ordinal < 0 || ordinal >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda:", ordinal, ": this machine has ", count, " GPU", count == 1 ? "" : "s"));
  }
  return std::unique_ptr<DeviceRuntime>(new CudaDeviceRuntime(ordinal));
}

}  // namespace corescape::device
