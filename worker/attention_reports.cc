#include "worker/attention_reports.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace corescape::worker {

absl::StatusOr<v1::AttentionDemand> BuildAttentionDemand(
    const v1::JobAssignment& assignment, uint64_t attention_epoch, int64_t step,
    const std::vector<std::vector<int64_t>>& micro_batches) {
  if (micro_batches.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("step ", step, " has no micro-batch"));
  }
  v1::AttentionDemand demand;
  demand.set_job_id(assignment.job_id());
  demand.set_generation(assignment.generation());
  demand.set_rank(assignment.rank());
  demand.set_step(step);
  demand.set_attention_epoch(attention_epoch);
  for (size_t m = 0; m < micro_batches.size(); ++m) {
    v1::AttentionMicroBatch* out = demand.add_micro_batches();
    for (size_t d = 0; d < micro_batches[m].size(); ++d) {
      if (micro_batches[m][d] < 1) {
        return absl::InvalidArgumentError(absl::StrCat("micro-batch ", m, " of step ", step,
                                                       ": document ", d, " has length ",
                                                       micro_batches[m][d]));
      }
      out->add_document_lengths(micro_batches[m][d]);
    }
  }
  return demand;
}

namespace {

// What the demands need of an assignment (not the whole spec).
v1::JobAssignment DemandIdentity(const v1::JobAssignment& assignment) {
  v1::JobAssignment kept;
  kept.set_job_id(assignment.job_id());
  kept.set_generation(assignment.generation());
  kept.set_rank(assignment.rank());
  kept.mutable_spec()->set_steps(assignment.spec().steps());
  return kept;
}

}  // namespace

AttentionDemandLookahead::AttentionDemandLookahead(const v1::JobAssignment& assignment,
                                                   Sender send)
    : assignment_(DemandIdentity(assignment)), send_(std::move(send)) {}

void AttentionDemandLookahead::BeforeStep(int64_t completed_steps, uint64_t attention_epoch,
                                          const Peek& peek) {
  if (attention_epoch != epoch_) {
    // A new epoch plans over other servers: what went out before is void.
    epoch_ = attention_epoch;
    sent_through_ = completed_steps;
  }
  const int64_t last = std::min(completed_steps + 2, assignment_.spec().steps());
  for (int64_t step = std::max(sent_through_, completed_steps) + 1; step <= last; ++step) {
    auto micro_batches = peek(step - completed_steps);
    absl::StatusOr<v1::AttentionDemand> demand =
        micro_batches.ok() ? BuildAttentionDemand(assignment_, epoch_, step, *micro_batches)
                           : micro_batches.status();
    sent_through_ = step;
    if (!demand.ok()) {
      LOG_EVERY_N(WARNING, 20) << "job " << assignment_.job_id() << ": no attention demand for "
                               << "step " << step << " (the participants plan it): "
                               << demand.status();
      continue;
    }
    v1::NodeMessage message;
    *message.mutable_attention_demand() = *std::move(demand);
    send_(std::move(message));
  }
}

absl::StatusOr<std::vector<attention::ShippedPlan>> ShippedPlansFromStepPlan(
    const v1::AttentionStepPlan& step_plan, int32_t workers, int32_t servers) {
  std::vector<attention::ShippedPlan> plans;
  for (int m = 0; m < step_plan.micro_batches_size(); ++m) {
    const v1::AttentionStepPlan::MicroBatch& micro_batch = step_plan.micro_batches(m);
    if (micro_batch.tasks_size() > attention::kMaxShippedPlanTasks) {
      return absl::InvalidArgumentError(absl::StrCat("attention_step_plan.micro_batches[", m,
                                                     "]: ", micro_batch.tasks_size(),
                                                     " tasks"));
    }
    attention::ShippedPlan plan;
    plan.step = step_plan.step();
    plan.speed_weights_version = step_plan.speed_weights_version();
    for (int t = 0; t < micro_batch.tasks_size(); ++t) {
      const v1::AttentionTask& task = micro_batch.tasks(t);
      const std::string field =
          absl::StrCat("attention_step_plan.micro_batches[", m, "].tasks[", t, "]");
      if (task.worker_rank() < 0 || task.worker_rank() >= workers) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".worker_rank: ",
                                                       task.worker_rank(), ", the job has ",
                                                       workers, " workers"));
      }
      if (task.server() < 0 || task.server() >= servers) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".server: ", task.server(),
                                                       ", the attention epoch has ", servers,
                                                       " servers"));
      }
      if (task.document() < 0 || task.q_begin() < 0 || task.q_end() <= task.q_begin()) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": document ", task.document(),
                                                       " queries [", task.q_begin(), ", ",
                                                       task.q_end(), ")"));
      }
      plan.tasks.push_back({task.worker_rank(), task.document(), task.q_begin(), task.q_end(),
                            task.server()});
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace corescape::worker
