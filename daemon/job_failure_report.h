#ifndef CORESCAPE_DAEMON_JOB_FAILURE_REPORT_H_
#define CORESCAPE_DAEMON_JOB_FAILURE_REPORT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "corescape/v1/node.pb.h"

namespace corescape {

// The session message by which a worker or attention server reports that
// its part of a job failed: job, generation and rank from its assignment,
// the error, and the attention epoch it was in (the scheduler ignores a
// report from an epoch it already re-planned).
v1::NodeMessage JobFailureMessage(const v1::JobAssignment& assignment, const absl::Status& error,
                                  uint64_t attention_epoch);

// How long a participant whose core attention failed waits for a newer
// attention epoch (the scheduler re-plans within about a lease) before it
// reports the failure: the assignment's bound, 20 s if it names none.
absl::Duration AttentionFailoverTimeout(const v1::JobAssignment& assignment);

}  // namespace corescape

#endif  // CORESCAPE_DAEMON_JOB_FAILURE_REPORT_H_
