#include "worker/attention_reports.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "worker/attention_forwarder.h"

namespace corescape::worker {
namespace {

// Hands every layer-0 forward's tasks to the reports, then runs the real
// executor unchanged.
class DemandReportingAttention final : public AttentionForwarder<AbortableAttention> {
 public:
  DemandReportingAttention(std::shared_ptr<AbortableAttention> inner,
                           const v1::JobAssignment& assignment, AttentionDemandReports* reports)
      : AttentionForwarder(std::move(inner)), reports_(reports) {
    assignment_.set_job_id(assignment.job_id());
    assignment_.set_generation(assignment.generation());
    assignment_.set_rank(assignment.rank());
  }

  absl::Status Forward(int layer, const kernels::AttentionShape& shape,
                       absl::Span<const kernels::AttentionTask> tasks, const float* q,
                       const float* k, const float* v, int64_t rows, float* o,
                       float* lse) override {
    if (layer == 0) reports_->OnMicroBatch(assignment_, tasks);
    return AttentionForwarder::Forward(layer, shape, tasks, q, k, v, rows, o, lse);
  }
  absl::Status StartForward(int half, int layer, const kernels::AttentionShape& shape,
                            absl::Span<const kernels::AttentionTask> tasks, const float* q,
                            const float* k, const float* v, int64_t rows, float* o,
                            float* lse) override {
    // Only the first after ExpectStep is reported: half A's documents.
    if (layer == 0) reports_->OnMicroBatch(assignment_, tasks);
    return AttentionForwarder::StartForward(half, layer, shape, tasks, q, k, v, rows, o, lse);
  }

 private:
  v1::JobAssignment assignment_;  // job id, generation, rank only
  AttentionDemandReports* const reports_;
};

}  // namespace

absl::StatusOr<v1::AttentionDemand> BuildAttentionDemand(
    const v1::JobAssignment& assignment, int64_t step,
    absl::Span<const kernels::AttentionTask> tasks) {
  v1::AttentionDemand demand;
  demand.set_job_id(assignment.job_id());
  demand.set_generation(assignment.generation());
  demand.set_rank(assignment.rank());
  demand.set_step(step);
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].q_begin != 0 || tasks[i].q_end < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("task ", i, " covers queries [", tasks[i].q_begin, ", ", tasks[i].q_end,
                       "), not a whole document"));
    }
    demand.add_document_lengths(tasks[i].q_end);
  }
  return demand;
}

void AttentionDemandReports::ExpectStep(const v1::JobAssignment& assignment, int64_t step,
                                        Sender send) {
  absl::MutexLock lock(&mu_);
  job_id_ = assignment.job_id();
  generation_ = assignment.generation();
  step_ = step;
  send_ = std::move(send);
}

void AttentionDemandReports::OnMicroBatch(const v1::JobAssignment& assignment,
                                          absl::Span<const kernels::AttentionTask> tasks) {
  int64_t step = 0;
  Sender send;
  {
    absl::MutexLock lock(&mu_);
    // Only the first micro-batch after ExpectStep: later ones of the step
    // (gradient accumulation) and validation are not reported.
    if (step_ == 0 || !send_ || assignment.job_id() != job_id_ ||
        assignment.generation() != generation_) {
      return;
    }
    std::swap(step, step_);
    send = send_;
  }
  auto demand = BuildAttentionDemand(assignment, step, tasks);
  if (!demand.ok()) {
    LOG_EVERY_N(WARNING, 100) << "no attention demand for step " << step << " of job "
                              << assignment.job_id() << ": " << demand.status();
    return;
  }
  v1::NodeMessage message;
  *message.mutable_attention_demand() = *std::move(demand);
  send(std::move(message));
}

AttentionFactory AttentionDemandReports::Wrap(AttentionFactory factory) {
  if (factory == nullptr) return nullptr;
  return [this, factory = std::move(factory)](const v1::JobAssignment& assignment,
                                              const train::TrainerConfig& config)
             -> absl::StatusOr<std::shared_ptr<AbortableAttention>> {
    auto attention = factory(assignment, config);
    if (!attention.ok()) return attention.status();
    // The scheduler plans DISAGGREGATED jobs only (it refuses other demands).
    if (assignment.spec().attention().mode() == v1::IN_PLACE) return attention;
    return std::shared_ptr<AbortableAttention>(
        std::make_shared<DemandReportingAttention>(*std::move(attention), assignment, this));
  };
}

}  // namespace corescape::worker
