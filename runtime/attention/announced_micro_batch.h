#ifndef CORESCAPE_RUNTIME_ATTENTION_ANNOUNCED_MICRO_BATCH_H_
#define CORESCAPE_RUNTIME_ATTENTION_ANNOUNCED_MICRO_BATCH_H_

// How every participant (each worker and each attention server) turns what
// the workers announced at the forward of layer 0 into the micro-batch's
// plan. The inputs are the same everywhere, so all reach the same plan.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/attention/documents_message.h"
#include "runtime/attention/micro_batch_plan.h"
#include "runtime/kernels/core_attention.h"

namespace corescape::attention {

// DataLoss naming `who` unless every announced length is in [1, 2^32].
absl::Status CheckAnnouncedLengths(const std::vector<std::vector<int64_t>>& worker_documents,
                                   absl::string_view who);

// `worker_documents` are every worker's announced lengths; `worker0` is
// what worker 0 sent besides (its speed weights and maybe the scheduler's
// plan). The scheduler's plan is used when it covers exactly these
// documents over options.servers servers; otherwise the participants plan
// with worker 0's weights (options.server_speeds is ignored). `refusal`, if
// not null, gets why a shipped plan was not used ("" when it was, or none
// came). DataLoss naming `who` for a length outside [1, 2^32].
absl::StatusOr<MicroBatchPlan> PlanAnnouncedMicroBatch(
    std::vector<std::vector<int64_t>> worker_documents, const DocumentsMessage& worker0,
    const kernels::AttentionShape& shape, PlanOptions options, absl::string_view who,
    std::string* refusal);

// Where a participant's plans came from, for its log.
struct PlanSourceCounts {
  int64_t scheduler = 0;     // the scheduler's plan, shipped by worker 0
  int64_t participants = 0;  // planned by the participants
  void Count(const MicroBatchPlan& plan);
  // "9 of 10 micro-batches on the scheduler's plans, 1 planned here
  // (validation, and plans late or not fitting)"
  std::string Describe() const;
};

// One participant's planning of its micro-batches: PlanAnnouncedMicroBatch
// with the participant's options, counted by source, and logged — a shipped
// plan it could not use (rate-limited), and each change of speed weights.
class ParticipantPlanner {
 public:
  // `who` names the participant in the log ("attention worker 1").
  ParticipantPlanner(std::string who, PlanOptions options)
      : who_(std::move(who)), options_(std::move(options)) {}

  // The plan of the micro-batch `announce` (its documents header) begins.
  absl::StatusOr<MicroBatchPlan> Plan(std::vector<std::vector<int64_t>> worker_documents,
                                      const DocumentsMessage& worker0,
                                      const ExchangeHeader& announce);

  const PlanSourceCounts& sources() const { return sources_; }

 private:
  const std::string who_;
  const PlanOptions options_;
  PlanSourceCounts sources_;
  std::optional<uint64_t> weights_version_;  // logged when it changes
};

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_ANNOUNCED_MICRO_BATCH_H_
