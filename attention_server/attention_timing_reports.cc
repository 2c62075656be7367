#include "attention_server/attention_timing_reports.h"

namespace corescape::attention_server {

v1::NodeMessage AttentionTimingMessage(const v1::JobAssignment& assignment,
                                       const attention::MicroBatchTiming& timing) {
  v1::NodeMessage message;
  v1::AttentionTaskTiming* report = message.mutable_attention_timing();
  report->set_job_id(assignment.job_id());
  report->set_generation(assignment.generation());
  report->set_micro_batch(static_cast<int64_t>(timing.micro_batch));
  report->set_cost_units(timing.cost_units);
  report->set_seconds(timing.seconds);
  return message;
}

}  // namespace corescape::attention_server
