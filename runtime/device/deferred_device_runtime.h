#ifndef CORESCAPE_RUNTIME_DEVICE_DEFERRED_DEVICE_RUNTIME_H_
#define CORESCAPE_RUNTIME_DEVICE_DEFERRED_DEVICE_RUNTIME_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "runtime/device/cpu_device_runtime.h"
#include "runtime/device/device_runtime.h"

namespace corescape::device {

// The CPU as a device whose streams behave as a GPU's may: work submitted
// to a stream only queues, and runs when the host blocks on something
// (a stream's or an event's Synchronize, an event's Query, Synchronize()).
// Then the streams run their queues in a fixed preference, each op as soon
// as the events it waits for allow, so one stream races as far ahead of
// another as their events let it. Code whose ordering is right computes the
// same bits as on CpuDeviceRuntime; code that reads a result before waiting
// for it, or lets a copy overwrite memory another stream still reads, does
// not. For tests: it is the CPU runtime's memory and a single-threaded
// scheduler, not a fast device.
//
// Thread-safe: streams may be fed from several host threads; the queued
// work runs on whichever thread blocks, one op at a time. Streams and
// events must not outlive their runtime.
class DeferredDeviceRuntime final : public DeviceRuntime {
 public:
  enum class Order {
    kNewestStreamFirst,  // copy streams made after the compute stream race ahead
    kOldestStreamFirst,  // they lag behind it
  };
  // `capacity_bytes` bounds device memory as CpuDeviceRuntime's does.
  explicit DeferredDeviceRuntime(Order order = Order::kNewestStreamFirst, size_t capacity_bytes = 0)
      : order_(order), memory_(capacity_bytes) {}
  // Runs what is still queued (work that no one waited for still happens).
  ~DeferredDeviceRuntime() override;

  Device device() const override { return Device::Cpu(); }
  absl::StatusOr<DeviceInfo> Info() override { return memory_.Info(); }
  absl::StatusOr<void*> AllocateDevice(size_t bytes) override { return memory_.AllocateDevice(bytes); }
  // Both frees wait for every stream first, as cudaFree and cudaFreeHost do.
  absl::Status FreeDevice(void* ptr) override;
  absl::StatusOr<void*> AllocatePinnedHost(size_t bytes) override {
    return memory_.AllocatePinnedHost(bytes);
  }
  absl::Status FreePinnedHost(void* ptr) override;
  absl::StatusOr<std::unique_ptr<Stream>> CreateStream() override;
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override;
  // No clock: the work runs whenever the host blocks.
  absl::StatusOr<float> ElapsedMilliseconds(Event& start, Event& end) override;
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                         Stream& stream) override;
  absl::Status Synchronize() override;

  // Ops run so far, over every stream (tests check that work was deferred).
  int64_t ops_run() const;

 private:
  class DeferredStream;
  class DeferredEvent;
  // A point in a stream's queue: reached once `ops` of its ops have run
  // (`ran` outlives the stream; null: never recorded, reached).
  struct Mark {
    std::shared_ptr<const int64_t> ran;
    int64_t ops = 0;
  };
  struct Op {
    absl::AnyInvocable<void() &&> run;  // null: a wait for `wait`
    Mark wait;
  };

  bool Reached(const Mark& mark) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Push(DeferredStream& stream, Op op) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs ops, one at a time in the runtime's preference, until `done()` or
  // no stream can move (INTERNAL: a wait that can never be met).
  template <typename Done>
  absl::Status RunUntil(Done done) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the stream's queue out and drops it (a destroyed stream's work
  // still happens, as CUDA's does).
  void Forget(DeferredStream* stream) ABSL_LOCKS_EXCLUDED(mu_);

  const Order order_;
  CpuDeviceRuntime memory_;
  mutable absl::Mutex mu_;
  std::vector<DeferredStream*> streams_ ABSL_GUARDED_BY(mu_);  // in creation order
  int64_t ops_run_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace corescape::device

#endif  // CORESCAPE_RUNTIME_DEVICE_DEFERRED_DEVICE_RUNTIME_H_
