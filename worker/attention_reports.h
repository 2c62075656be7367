#ifndef CORESCAPE_WORKER_ATTENTION_REPORTS_H_
#define CORESCAPE_WORKER_ATTENTION_REPORTS_H_

// What a worker of a DISAGGREGATED job tells the scheduler about core
// attention: the document lengths of the first micro-batch of every step
// (AttentionDemand), so the scheduler can plan it (scheduler/
// attention_planning.h). The documents are what the trainer hands the
// attention executor at the forward of layer 0.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "corescape/v1/node.pb.h"
#include "runtime/kernels/core_attention.h"
#include "worker/job_runner.h"

namespace corescape::worker {

// The demand of `assignment`'s rank for `step`: one length per task. The
// trainer's tasks are whole documents (q_begin 0); anything else is an
// InvalidArgument, as the disaggregated executor refuses it too.
absl::StatusOr<v1::AttentionDemand> BuildAttentionDemand(
    const v1::JobAssignment& assignment, int64_t step,
    absl::Span<const kernels::AttentionTask> tasks);

// Joins the job runner, which knows which step comes next, with every
// attention executor of a run (the first, and each new one after an
// attention failover), which sees the documents.
class AttentionDemandReports {
 public:
  using Sender = std::function<void(v1::NodeMessage)>;

  // The next micro-batch of `assignment`'s job and generation begins
  // `step`; its demand goes to `send` (the node session). Each call is
  // reported once: a step redone after an attention failover again.
  void ExpectStep(const v1::JobAssignment& assignment, int64_t step, Sender send);

  // Executors made by the returned factory report to this (IN_PLACE ones
  // do not: there is no attention server to plan for); null stays null.
  AttentionFactory Wrap(AttentionFactory factory);

  // An executor saw the forward of layer 0 of a micro-batch.
  void OnMicroBatch(const v1::JobAssignment& assignment,
                    absl::Span<const kernels::AttentionTask> tasks);

 private:
  absl::Mutex mu_;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;  // 0: nothing expected
  Sender send_ ABSL_GUARDED_BY(mu_);
};

}  // namespace corescape::worker

#endif  // CORESCAPE_WORKER_ATTENTION_REPORTS_H_
