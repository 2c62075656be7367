#ifndef CORESCAPE_RUNTIME_DEVICE_STREAM_PROFILER_H_
#define CORESCAPE_RUNTIME_DEVICE_STREAM_PROFILER_H_

// Where a stream's time goes: named spans of its work, each a pair of events
// recorded around the work (no synchronization while profiling), summed by
// name when the profile is taken. A span begun inside another is part of
// the outer one (an op that issues other ops is counted once, as itself),
// so the totals add up to at most the stream's busy time. For finding a training step's hot spots;
// code that takes a null profiler records nothing.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/device/device_runtime.h"

namespace corescape::device {

class StreamProfiler {
 public:
  struct Total {
    std::string name;
    int64_t spans = 0;
    double milliseconds = 0;
  };

  // Both must outlive the profiler.
  StreamProfiler(DeviceRuntime* runtime, Stream* stream) : runtime_(runtime), stream_(stream) {}

  // A span named `name` begins at the stream's current position; End closes
  // it (Begin/End pairs inside it only count depth). A failure (an event
  // that cannot be made or recorded, an End outside any span) is kept and
  // returned by Take: a profile must not change what the profiled code
  // does.
  void Begin(std::string_view name);
  void End();

  // Waits for the recorded spans, returns their totals by name (largest
  // first) and starts over; the first failure since the last Take instead.
  absl::StatusOr<std::vector<Total>> Take();

 private:
  struct Span {
    std::string name;
    size_t first_event;  // events_[first_event] and [first_event + 1]
  };

  Event* NextEvent();
  void Fail(absl::Status status);

  DeviceRuntime* runtime_;
  Stream* stream_;
  std::vector<std::unique_ptr<Event>> events_;  // reused across Takes
  size_t events_used_ = 0;
  std::vector<Span> spans_;
  int depth_ = 0;  // open spans, the outermost recorded
  bool outer_recorded_ = false;  // the open outermost span's Begin succeeded
  absl::Status first_failure_;
};

// A StreamProfiler that is off until started: what a backend keeps so that
// its callers can profile it on demand.
class OnDemandProfiler {
 public:
  // `stream`: the stream whose work is profiled; null for a backend whose
  // work runs on the calling thread (a stream of its own marks the times).
  OnDemandProfiler(DeviceRuntime* runtime, Stream* stream) : runtime_(runtime), stream_(stream) {}

  // Starts a profile (again: the running one is dropped).
  absl::Status Start();
  // The totals since Start (StreamProfiler::Take); profiling stops.
  // FAILED_PRECONDITION when not started.
  absl::StatusOr<std::vector<StreamProfiler::Total>> Take();
  // The running profiler, or null: what ProfileSpan takes.
  StreamProfiler* active() { return profiler_.get(); }

 private:
  DeviceRuntime* runtime_;
  Stream* stream_;
  std::unique_ptr<Stream> own_stream_;
  std::unique_ptr<StreamProfiler> profiler_;
};

// Begin at construction and End at destruction when the profiler is not
// null.
class ProfileSpan {
 public:
  ProfileSpan(StreamProfiler* profiler, std::string_view name) : profiler_(profiler) {
    if (profiler_ != nullptr) profiler_->Begin(name);
  }
  ~ProfileSpan() {
    if (profiler_ != nullptr) profiler_->End();
  }
  ProfileSpan(const ProfileSpan&) = delete;
  ProfileSpan& operator=(const ProfileSpan&) = delete;

 private:
  StreamProfiler* profiler_;
};

}  // namespace corescape::device

#endif  // CORESCAPE_RUNTIME_DEVICE_STREAM_PROFILER_H_
