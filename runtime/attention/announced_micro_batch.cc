#include "runtime/attention/announced_micro_batch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace corescape::attention {

absl::Status CheckAnnouncedLengths(const std::vector<std::vector<int64_t>>& worker_documents,
                                   absl::string_view who) {
  for (size_t w = 0; w < worker_documents.size(); ++w) {
    int64_t tokens = 0;
    for (int64_t length : worker_documents[w]) {
      // Checked one by one, so the sum cannot overflow.
      if (length < 1 || length > kMaxTokensPerMicroBatch - tokens) {
        return absl::DataLossError(absl::StrCat(
            "document length ", length, " from worker ", w, " in ", who, " (", tokens,
            " tokens before it; at most ", kMaxTokensPerMicroBatch, " per micro-batch)"));
      }
      tokens += length;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MicroBatchPlan> PlanAnnouncedMicroBatch(
    std::vector<std::vector<int64_t>> worker_documents, const DocumentsMessage& worker0,
    const kernels::AttentionShape& shape, PlanOptions options, absl::string_view who,
    std::string* refusal) {
  if (refusal != nullptr) refusal->clear();
  if (absl::Status s = CheckAnnouncedLengths(worker_documents, who); !s.ok()) return s;
  const VersionedSpeedWeights weights =
      worker0.weights ? *worker0.weights : VersionedSpeedWeights::Equal(options.servers);
  if (worker0.plan) {
    auto adopted = AdoptMicroBatchPlan(worker_documents, shape, options, worker0.plan->tasks);
    if (adopted.ok()) {
      adopted->source = MicroBatchPlan::Source::kScheduler;
      adopted->scheduler_step = worker0.plan->step;
      adopted->speed_weights_version = worker0.plan->speed_weights_version;
      return adopted;
    }
    if (refusal != nullptr) {
      *refusal = absl::StrCat("the scheduler's plan of step ", worker0.plan->step,
                              " does not fit ", who, ": ", adopted.status().message());
    }
  }
  options.server_speeds = weights.weights;
  auto plan = PlanMicroBatch(std::move(worker_documents), shape, options);
  if (!plan.ok()) return plan.status();
  plan->speed_weights_version = weights.version;
  return plan;
}

void PlanSourceCounts::Count(const MicroBatchPlan& plan) {
  (plan.source == MicroBatchPlan::Source::kScheduler ? scheduler : participants) += 1;
}

std::string PlanSourceCounts::Describe() const {
  return absl::StrCat(scheduler, " of ", scheduler + participants,
                      " micro-batches on the scheduler's plans, ", participants,
                      " planned here (validation, and plans late or not fitting)");
}

absl::StatusOr<MicroBatchPlan> ParticipantPlanner::Plan(
    std::vector<std::vector<int64_t>> worker_documents, const DocumentsMessage& worker0,
    const ExchangeHeader& announce) {
  std::string refusal;
  auto plan = PlanAnnouncedMicroBatch(std::move(worker_documents), worker0, announce.shape(),
                                      options_, announce.Describe(), &refusal);
  if (!plan.ok()) return plan;
  sources_.Count(*plan);
  if (!refusal.empty()) {
    LOG_EVERY_N(WARNING, 20) << who_ << ": " << refusal << "; planning it here";
  }
  if (weights_version_ != plan->speed_weights_version) {
    weights_version_ = plan->speed_weights_version;
    std::string source;
    if (plan->source == MicroBatchPlan::Source::kScheduler) {
      source = absl::StrCat("the scheduler's plan of step ", plan->scheduler_step);
    } else {
      source = absl::StrCat("planned here with weights ",
                            worker0.weights ? worker0.weights->Describe() : "all equal");
    }
    LOG(INFO) << who_ << ": planning with speed weights version " << plan->speed_weights_version
              << " from micro-batch " << announce.micro_batch << " (" << source << ")";
  }
  return plan;
}

}  // namespace corescape::attention
