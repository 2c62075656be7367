#include "runtime/device/stream_profiler.h"

#include <algorithm>
#include <map>
#include <utility>


namespace corescape::device {

void StreamProfiler::Fail(absl::Status status) {
  if (first_failure_.ok()) first_failure_ = std::move(status);
}

Event* StreamProfiler::NextEvent() {
  if (events_used_ == events_.size()) {
    absl::StatusOr<std::unique_ptr<Event>> event = runtime_->CreateEvent();
    if (!event.ok()) {
      Fail(event.status());
      return nullptr;
    }
    events_.push_back(*std::move(event));
  }
  return events_[events_used_++].get();
}

void StreamProfiler::Begin(std::string_view name) {
  if (depth_++ > 0) return;
  const size_t first = events_used_;
  Event* begin = NextEvent();
  Event* end = NextEvent();
  if (begin == nullptr || end == nullptr) {
    events_used_ = first;
    return;
  }
  if (absl::Status s = stream_->Record(*begin); !s.ok()) {
    events_used_ = first;
    Fail(std::move(s));
    return;
  }
  spans_.push_back({std::string(name), first});
  outer_recorded_ = true;
}

void StreamProfiler::End() {
  if (depth_ == 0) {
    Fail(absl::FailedPreconditionError("profile span ended while none is open"));
    return;
  }
  if (--depth_ > 0) return;
  if (!std::exchange(outer_recorded_, false)) return;  // its Begin failed
  if (absl::Status s = stream_->Record(*events_[spans_.back().first_event + 1]); !s.ok()) {
    spans_.pop_back();
    Fail(std::move(s));
  }
}

absl::StatusOr<std::vector<StreamProfiler::Total>> StreamProfiler::Take() {
  absl::Status failure = std::exchange(first_failure_, absl::OkStatus());
  if (failure.ok() && depth_ > 0) failure = absl::FailedPreconditionError("profile taken with a span open");
  std::map<std::string, Total> by_name;
  if (failure.ok()) failure = stream_->Synchronize();
  for (const Span& span : spans_) {
    if (!failure.ok()) break;
    absl::StatusOr<float> ms =
        runtime_->ElapsedMilliseconds(*events_[span.first_event], *events_[span.first_event + 1]);
    if (!ms.ok()) {
      failure = ms.status();
      break;
    }
    Total& total = by_name[span.name];
    total.name = span.name;
    ++total.spans;
    total.milliseconds += *ms;
  }
  spans_.clear();
  events_used_ = 0;
  depth_ = 0;
  outer_recorded_ = false;
  if (!failure.ok()) return failure;
  std::vector<Total> totals;
  for (auto& [name, total] : by_name) totals.push_back(std::move(total));
  std::stable_sort(totals.begin(), totals.end(),
                   [](const Total& a, const Total& b) { return a.milliseconds > b.milliseconds; });
  return totals;
}

absl::Status OnDemandProfiler::Start() {
  Stream* stream = stream_;
  if (stream == nullptr) {
    if (own_stream_ == nullptr) {
      absl::StatusOr<std::unique_ptr<Stream>> made = runtime_->CreateStream();
      if (!made.ok()) return made.status();
      own_stream_ = *std::move(made);
    }
    stream = own_stream_.get();
  }
  profiler_ = std::make_unique<StreamProfiler>(runtime_, stream);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StreamProfiler::Total>> OnDemandProfiler::Take() {
  if (profiler_ == nullptr) return absl::FailedPreconditionError("op profile taken without being started");
  absl::StatusOr<std::vector<StreamProfiler::Total>> totals = profiler_->Take();
  profiler_.reset();
  return totals;
}

}  // namespace corescape::device
