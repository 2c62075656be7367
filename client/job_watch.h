// Following a job over JobService.WatchJob without losing or repeating an
// event when the stream breaks.
//
// WatchJob is a server stream with no overall deadline, so two things can
// go wrong that a unary deadline would otherwise catch:
//  - the stream ends with an error (scheduler restarted, connection reset):
//    it is reopened with after_sequence = the last sequence delivered, with
//    exponential backoff, until `reconnect_timeout` has passed without any
//    contact with the scheduler;
//  - the stream just goes quiet (scheduler hung, or a quiet PENDING job):
//    after `probe_interval` without an event, a GetJob probe (with the
//    client's unary deadline) asks whether the scheduler still answers. An
//    unanswered probe cancels the stream, which then counts as lost.
// Events whose sequence is not above the last one delivered are dropped, so
// a scheduler that replays a little too much does not duplicate output.
#ifndef CORESCAPE_CLIENT_JOB_WATCH_H_
#define CORESCAPE_CLIENT_JOB_WATCH_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/scheduler_client.h"
#include "corescape/v1/job.pb.h"

namespace corescape::client {

// SUCCEEDED, FAILED or CANCELLED: the job will not change state again.
bool IsTerminalJobState(corescape::v1::JobState state);

struct WatchJobOptions {
  std::string job_id;
  // Deliver events with a sequence above this (0: from the job's first
  // event; the scheduler replays what it kept).
  uint64_t after_sequence = 0;
  // Give up (UNAVAILABLE) once the stream is lost and nothing has been
  // heard from the scheduler (no event, no answered probe) for this long.
  absl::Duration reconnect_timeout = absl::Seconds(30);
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(4);
  // With no event for this long, probe the scheduler with GetJob.
  absl::Duration probe_interval = absl::Seconds(10);
};

enum class WatchAction { kContinue, kStop };

struct WatchJobCallbacks {
  // Called once per event, in sequence order, on the calling thread.
  std::function<WatchAction(const corescape::v1::JobEvent&)> on_event;
  // Optional: the stream was lost for `why`; attempt 1 is the first reopen
  // after a loss (counting restarts after any contact).
  std::function<void(const absl::Status& why, int attempt)> on_reconnecting;
};

struct WatchJobResult {
  // A SUCCEEDED/FAILED/CANCELLED state event was delivered (false when
  // on_event asked to stop first).
  bool job_ended = false;
  corescape::v1::JobState final_state = corescape::v1::JOB_STATE_UNSPECIFIED;
  uint64_t last_sequence = 0;  // highest sequence delivered
  int reconnects = 0;          // streams reopened after a loss
};

// Streams the job's events into callbacks.on_event until a terminal state
// event (delivered, then the watch returns) or until on_event returns
// kStop. Errors: the stream's own status when it is not a connectivity
// problem (NOT_FOUND for an unknown job, UNIMPLEMENTED, ...); UNAVAILABLE
// when the stream could not be resumed within reconnect_timeout.
//
// If two probes in a row find the job ended while the stream delivers no
// terminal event, the watch ends with a synthesized state event (sequence
// 0, the job's state, state_reason as message, finished_unix_ms).
absl::StatusOr<WatchJobResult> WatchJob(SchedulerClient& client,
                                        const WatchJobOptions& options,
                                        const WatchJobCallbacks& callbacks);

}  // namespace corescape::client

#endif  // CORESCAPE_CLIENT_JOB_WATCH_H_
