#ifndef CORESCAPE_SCHEDULER_ATTENTION_PLAN_BUILDER_H_
#define CORESCAPE_SCHEDULER_ATTENTION_PLAN_BUILDER_H_

// The scheduler's plan of one step of a DISAGGREGATED job: pure, from the
// workers' document lengths, the servers to use and their speed weights.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "corescape/v1/job.pb.h"
#include "corescape/v1/node.pb.h"
#include "runtime/planner/plan.h"

namespace corescape::scheduler {

// One attention server a plan may give work to.
struct PlannedServer {
  std::string name;
  std::string address;        // data-plane address
  double speed_weight = 1.0;  // relative speed, mean 1 over the planned servers
  double measured_speed = 0;  // cost units per second; 0: no timing yet
  // Its index among the attention epoch's servers (the participants'
  // attention_server_addresses), which step plans name.
  int32_t epoch_index = 0;
};

// The attention shape of the job's model (preset plus the spec's overrides),
// as the participants see it, fp32 on the wire like their exchanges.
absl::StatusOr<planner::ModelShape> AttentionModelShape(const v1::JobSpec& spec);

// Plans the step with the participants' planner input
// (attention::MicroBatchPlanInput, the servers' speed weights as speeds) and
// planner (planner::PlanAttention at the job's attention.tolerance) and
// describes the result. `excluded` lists
// the job's servers left out, for people.
absl::StatusOr<v1::AttentionPlan> BuildAttentionPlan(
    const v1::Job& job, int64_t step, std::vector<std::vector<int64_t>> worker_documents,
    const std::vector<PlannedServer>& servers, const std::vector<std::string>& excluded,
    absl::Time now);

// The tasks of `plan` (BuildAttentionPlan over `servers`) as the
// participants take them: each task's server is that server's epoch_index,
// so servers left out of the plan get no task and indices still match the
// participants' server list.
absl::StatusOr<v1::AttentionStepPlan::MicroBatch> EpochMicroBatch(
    const v1::AttentionPlan& plan, const std::vector<PlannedServer>& servers);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_ATTENTION_PLAN_BUILDER_H_
