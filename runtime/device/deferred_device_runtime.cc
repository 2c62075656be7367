#include "runtime/device/deferred_device_runtime.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "glog/logging.h"

namespace corescape::device {

class DeferredDeviceRuntime::DeferredEvent final : public Event {
 public:
  explicit DeferredEvent(DeferredDeviceRuntime* owner) : owner_(owner) {}
  absl::StatusOr<bool> Query() override {
    // The host looking is the host blocking: what can run, runs.
    if (absl::Status s = Synchronize(); !s.ok()) return s;
    return true;
  }
  absl::Status Synchronize() override {
    return owner_->RunUntil([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return owner_->Reached(mark_); });
  }
  DeferredDeviceRuntime* owner() const { return owner_; }
  Mark mark_;  // guarded by owner_->mu_

 private:
  DeferredDeviceRuntime* const owner_;
};

class DeferredDeviceRuntime::DeferredStream final : public Stream {
 public:
  explicit DeferredStream(DeferredDeviceRuntime* owner) : owner_(owner) {}
  ~DeferredStream() override { owner_->Forget(this); }

  absl::Status Record(Event& event) override {
    auto* e = dynamic_cast<DeferredEvent*>(&event);
    if (e == nullptr || e->owner() != owner_) {
      return absl::InvalidArgumentError("stream record: the event belongs to another device runtime");
    }
    absl::MutexLock lock(&owner_->mu_);
    e->mark_ = Mark{ran, enqueued};
    return absl::OkStatus();
  }
  absl::Status Wait(Event& event) override {
    auto* e = dynamic_cast<DeferredEvent*>(&event);
    if (e == nullptr || e->owner() != owner_) {
      return absl::InvalidArgumentError("stream wait: the event belongs to another device runtime");
    }
    Mark mark;
    {
      absl::MutexLock lock(&owner_->mu_);
      mark = e->mark_;  // the record as it stands now, as cudaStreamWaitEvent takes it
    }
    owner_->Push(*this, Op{nullptr, std::move(mark)});
    return absl::OkStatus();
  }
  absl::Status EnqueueHost(absl::AnyInvocable<void() &&> fn) override {
    if (!fn) return absl::InvalidArgumentError("stream: empty host function");
    owner_->Push(*this, Op{std::move(fn), {}});
    return absl::OkStatus();
  }
  absl::Status Synchronize() override {
    return owner_->RunUntil([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return queue.empty(); });
  }
  void* native_handle() override { return nullptr; }
  DeferredDeviceRuntime* owner() const { return owner_; }

  // Guarded by owner_->mu_.
  std::deque<Op> queue;
  int64_t enqueued = 0;
  std::shared_ptr<int64_t> ran = std::make_shared<int64_t>(0);

 private:
  DeferredDeviceRuntime* const owner_;
};

DeferredDeviceRuntime::~DeferredDeviceRuntime() {
  if (absl::Status s = Synchronize(); !s.ok()) LOG(ERROR) << "deferred device runtime: " << s;
}

bool DeferredDeviceRuntime::Reached(const Mark& mark) const {
  return mark.ran == nullptr || *mark.ran >= mark.ops;
}

void DeferredDeviceRuntime::Push(DeferredStream& stream, Op op) {
  absl::MutexLock lock(&mu_);
  stream.queue.push_back(std::move(op));
  ++stream.enqueued;
}

template <typename Done>
absl::Status DeferredDeviceRuntime::RunUntil(Done done) {
  absl::MutexLock lock(&mu_);
  while (!done()) {
    DeferredStream* runnable = nullptr;
    const int n = static_cast<int>(streams_.size());
    for (int i = 0; i < n && runnable == nullptr; ++i) {
      DeferredStream* stream = streams_[order_ == Order::kNewestStreamFirst ? n - 1 - i : i];
      if (stream->queue.empty()) continue;
      const Op& head = stream->queue.front();
      if (head.run == nullptr && !Reached(head.wait)) continue;
      runnable = stream;
    }
    if (runnable == nullptr) {
      return absl::InternalError("deferred device runtime: every stream with work waits for an event "
                                 "no stream will reach");
    }
    Op op = std::move(runnable->queue.front());
    runnable->queue.pop_front();
    // Op bodies do not call back into the runtime (Stream::EnqueueHost).
    if (op.run != nullptr) std::move(op.run)();
    ++*runnable->ran;
    ++ops_run_;
  }
  return absl::OkStatus();
}

void DeferredDeviceRuntime::Forget(DeferredStream* stream) {
  if (absl::Status s = RunUntil([stream]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stream->queue.empty(); });
      !s.ok()) {
    LOG(ERROR) << "deferred device runtime: a destroyed stream's work: " << s;
  }
  absl::MutexLock lock(&mu_);
  streams_.erase(std::remove(streams_.begin(), streams_.end(), stream), streams_.end());
}

absl::Status DeferredDeviceRuntime::FreeDevice(void* ptr) {
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  return memory_.FreeDevice(ptr);
}

absl::Status DeferredDeviceRuntime::FreePinnedHost(void* ptr) {
  if (absl::Status s = Synchronize(); !s.ok()) return s;
  return memory_.FreePinnedHost(ptr);
}

absl::StatusOr<std::unique_ptr<Stream>> DeferredDeviceRuntime::CreateStream() {
  auto stream = std::make_unique<DeferredStream>(this);
  absl::MutexLock lock(&mu_);
  streams_.push_back(stream.get());
  return stream;
}

absl::StatusOr<std::unique_ptr<Event>> DeferredDeviceRuntime::CreateEvent() {
  return std::make_unique<DeferredEvent>(this);
}

absl::StatusOr<float> DeferredDeviceRuntime::ElapsedMilliseconds(Event&, Event&) {
  return absl::UnimplementedError("deferred device runtime: no clock (its work runs when the host blocks)");
}

absl::Status DeferredDeviceRuntime::CopyAsync(void* dst, const void* src, size_t bytes, CopyKind,
                                              Stream& stream) {
  if (absl::Status s = ValidateCopy(dst, src, bytes); !s.ok()) return s;
  auto* s = dynamic_cast<DeferredStream*>(&stream);
  if (s == nullptr || s->owner() != this) {
    return absl::InvalidArgumentError("copy: the stream belongs to another device runtime");
  }
  if (bytes == 0) return absl::OkStatus();
  Push(*s, Op{[dst, src, bytes] { std::memcpy(dst, src, bytes); }, {}});
  return absl::OkStatus();
}

absl::Status DeferredDeviceRuntime::Synchronize() {
  return RunUntil([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return std::all_of(streams_.begin(), streams_.end(),
                       [](const DeferredStream* stream) { return stream->queue.empty(); });
  });
}

int64_t DeferredDeviceRuntime::ops_run() const {
  absl::MutexLock lock(&mu_);
  return ops_run_;
}

}  // namespace corescape::device
