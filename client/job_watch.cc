#include "client/job_watch.h"

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"

namespace corescape::client {

namespace v1 = ::corescape::v1;

bool IsTerminalJobState(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED ||
         state == v1::CANCELLED;
}

namespace {

// Codes after which reopening the stream can help: the connection broke,
// the server went away or shut the call down.
bool IsRetryableStreamError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

// A background thread that probes the scheduler with GetJob whenever the
// stream has been quiet for `probe_interval`, and cancels the current
// stream when the probe goes unanswered (or keeps finding the job ended).
class StreamWatchdog {
 public:
  StreamWatchdog(SchedulerClient& client, std::string job_id,
                 absl::Duration probe_interval)
      : client_(client),
        job_id_(std::move(job_id)),
        probe_interval_(probe_interval),
        last_contact_(absl::Now()) {
    thread_ = std::thread([this] { Run(); });
  }

  ~StreamWatchdog() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  // The stream now being read; the watchdog may TryCancel it until Detach.
  void Attach(grpc::ClientContext* context) {
    absl::MutexLock lock(&mu_);
    context_ = context;
    cancel_reason_.reset();
  }

  // Returns why the watchdog cancelled the stream, if it did.
  std::optional<absl::Status> Detach() {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
    return std::exchange(cancel_reason_, std::nullopt);
  }

  void NoteContact() {
    absl::MutexLock lock(&mu_);
    last_contact_ = absl::Now();
    terminal_probes_ = 0;
  }

  absl::Time last_contact() {
    absl::MutexLock lock(&mu_);
    return last_contact_;
  }

  // The job as a probe found it, once two probes in a row found it ended.
  std::optional<v1::Job> ended_job() {
    absl::MutexLock lock(&mu_);
    return ended_job_;
  }

 private:
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      // Waits for stop_, or for the next probe to be due.
      const absl::Time due = std::max(last_contact_, last_probe_) +
                             probe_interval_;
      mu_.AwaitWithDeadline(absl::Condition(&stop_), due);
      if (stop_) break;
      if (absl::Now() < std::max(last_contact_, last_probe_) + probe_interval_) {
        continue;  // an event arrived meanwhile
      }
      last_probe_ = absl::Now();
      mu_.Unlock();
      v1::GetJobRequest request;
      request.set_job_id(job_id_);
      absl::StatusOr<v1::GetJobResponse> probe = client_.GetJob(request);
      mu_.Lock();
      if (stop_) break;
      last_probe_ = absl::Now();
      if (!probe.ok()) {
        if (IsUnreachable(probe.status()) && context_ != nullptr) {
          cancel_reason_ = absl::UnavailableError(absl::StrCat(
              "the scheduler did not answer a GetJob probe after ",
              absl::FormatDuration(probe_interval_),
              " without events: ", probe.status().message()));
          context_->TryCancel();
        }
        continue;
      }
      last_contact_ = last_probe_;
      if (!IsTerminalJobState(probe->job().state())) {
        terminal_probes_ = 0;
        continue;
      }
      if (++terminal_probes_ >= 2) {
        ended_job_ = probe->job();
        if (context_ != nullptr) context_->TryCancel();
      }
    }
  }

  SchedulerClient& client_;
  const std::string job_id_;
  const absl::Duration probe_interval_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::optional<absl::Status> cancel_reason_ ABSL_GUARDED_BY(mu_);
  absl::Time last_contact_ ABSL_GUARDED_BY(mu_);
  absl::Time last_probe_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int terminal_probes_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<v1::Job> ended_job_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

v1::JobEvent EndEventFromJob(const v1::Job& job) {
  v1::JobEvent event;
  event.set_job_id(job.job_id());
  event.set_unix_ms(job.finished_unix_ms());
  event.set_state(job.state());
  event.set_message(job.state_reason());
  return event;
}

}  // namespace

absl::StatusOr<WatchJobResult> WatchJob(SchedulerClient& client,
                                        const WatchJobOptions& options,
                                        const WatchJobCallbacks& callbacks) {
  WatchJobResult result;
  result.last_sequence = options.after_sequence;
  StreamWatchdog watchdog(client, options.job_id, options.probe_interval);

  // The first failure since the last contact, and reopen attempts since.
  std::optional<absl::Time> outage_start;
  int attempt = 0;
  absl::Duration backoff = options.initial_backoff;

  while (true) {
    grpc::ClientContext context;
    v1::WatchJobRequest request;
    request.set_job_id(options.job_id);
    request.set_after_sequence(result.last_sequence);
    watchdog.Attach(&context);
    auto reader = client.OpenWatchJob(&context, request);

    bool done = false;
    v1::JobEvent event;
    while (!done && reader->Read(&event)) {
      watchdog.NoteContact();
      if (event.sequence() != 0) {
        if (event.sequence() <= result.last_sequence) continue;  // seen
        result.last_sequence = event.sequence();
      }
      if (event.body_case() == v1::JobEvent::kState &&
          IsTerminalJobState(event.state())) {
        result.job_ended = true;
        result.final_state = event.state();
        done = true;
      }
      if (callbacks.on_event(event) == WatchAction::kStop) done = true;
    }
    if (done) {
      context.TryCancel();
      while (reader->Read(&event)) {
      }
    }
    const absl::Status stream_status = ToAbslStatus(reader->Finish());
    const std::optional<absl::Status> cancelled_because = watchdog.Detach();
    if (done) return result;

    if (std::optional<v1::Job> job = watchdog.ended_job()) {
      result.job_ended = true;
      result.final_state = job->state();
      callbacks.on_event(EndEventFromJob(*job));
      return result;
    }

    absl::Status why;
    if (cancelled_because.has_value()) {
      why = *cancelled_because;
    } else if (stream_status.ok()) {
      why = absl::UnavailableError(
          "the scheduler ended the WatchJob stream before the job ended");
    } else if (!IsRetryableStreamError(stream_status)) {
      return stream_status;
    } else {
      why = stream_status;
    }

    const absl::Time now = absl::Now();
    if (!outage_start.has_value() || watchdog.last_contact() > *outage_start) {
      outage_start = now;
      attempt = 0;
      backoff = options.initial_backoff;
    }
    if (now - *outage_start >= options.reconnect_timeout) {
      return absl::UnavailableError(absl::StrCat(
          "lost the WatchJob stream of job ", options.job_id,
          " and could not resume it within ",
          absl::FormatDuration(options.reconnect_timeout), ": ",
          why.message()));
    }
    ++attempt;
    if (callbacks.on_reconnecting) callbacks.on_reconnecting(why, attempt);
    absl::SleepFor(std::min(
        backoff, options.reconnect_timeout - (now - *outage_start)));
    backoff = std::min(backoff * 2, options.max_backoff);
    ++result.reconnects;
  }
}

}  // namespace corescape::client
