#ifndef CORESCAPE_WORKER_ATTENTION_REPORTS_H_
#define CORESCAPE_WORKER_ATTENTION_REPORTS_H_

// What a worker of a DISAGGREGATED job tells the scheduler about core
// attention ahead of time, and what it takes back: each upcoming step's
// document lengths (AttentionDemand), sent while the step before runs, so
// the scheduler can plan the step off the critical path and send worker 0
// the plans (AttentionStepPlan) before the step needs them
// (docs/disaggregation.md).

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "corescape/v1/node.pb.h"
#include "runtime/attention/shipped_plan.h"

namespace corescape::worker {

// The demand of `assignment`'s rank for `step` in `attention_epoch`: the
// document lengths of every core-attention micro-batch of the step.
// InvalidArgument for an empty step or a length < 1.
absl::StatusOr<v1::AttentionDemand> BuildAttentionDemand(
    const v1::JobAssignment& assignment, uint64_t attention_epoch, int64_t step,
    const std::vector<std::vector<int64_t>>& micro_batches);

// Sends each step's demand once per attention epoch, one step ahead: before
// step s runs, the demands of steps s and s+1 (the first time both, later
// only s+1; after a failover to a new epoch both again, planned over the new
// servers).
class AttentionDemandLookahead {
 public:
  // The lengths of every micro-batch of the step `steps_ahead` after the
  // last completed one (DataParallelTrainer::UpcomingAttentionDocuments).
  using Peek =
      std::function<absl::StatusOr<std::vector<std::vector<int64_t>>>(int64_t steps_ahead)>;
  using Sender = std::function<void(v1::NodeMessage)>;

  AttentionDemandLookahead(const v1::JobAssignment& assignment, Sender send);

  // Before the step after `completed_steps` runs in `attention_epoch`.
  // A step the loader cannot look at is skipped with a warning: the
  // participants then plan it themselves.
  void BeforeStep(int64_t completed_steps, uint64_t attention_epoch, const Peek& peek);

 private:
  const v1::JobAssignment assignment_;  // job, generation, rank, spec.steps
  const Sender send_;
  uint64_t epoch_ = 0;
  int64_t sent_through_ = 0;  // the last step whose demand went out in epoch_
};

// The scheduler's plans of one step's micro-batches, checked against the
// job's `workers` and `servers`: InvalidArgument naming the field for a
// task out of range (the participants would refuse the plan anyway; this
// keeps a bad one from travelling).
absl::StatusOr<std::vector<attention::ShippedPlan>> ShippedPlansFromStepPlan(
    const v1::AttentionStepPlan& step_plan, int32_t workers, int32_t servers);

}  // namespace corescape::worker

#endif  // CORESCAPE_WORKER_ATTENTION_REPORTS_H_
