#include "daemon/job_failure_report.h"

#include <string>

namespace corescape {

v1::NodeMessage JobFailureMessage(const v1::JobAssignment& assignment, const absl::Status& error,
                                  uint64_t attention_epoch) {
  v1::NodeMessage message;
  v1::JobFailureReport* report = message.mutable_job_failure();
  report->set_job_id(assignment.job_id());
  report->set_generation(assignment.generation());
  report->set_rank(assignment.rank());
  report->set_error(std::string(error.ToString()));
  report->set_attention_epoch(attention_epoch);
  return message;
}

absl::Duration AttentionFailoverTimeout(const v1::JobAssignment& assignment) {
  return assignment.attention_failover_timeout_ms() > 0
             ? absl::Milliseconds(assignment.attention_failover_timeout_ms())
             : absl::Seconds(20);
}

}  // namespace corescape
