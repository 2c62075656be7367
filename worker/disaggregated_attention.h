#ifndef CORESCAPE_WORKER_DISAGGREGATED_ATTENTION_H_
#define CORESCAPE_WORKER_DISAGGREGATED_ATTENTION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "corescape/v1/node.pb.h"
#include "runtime/comm/transport.h"
#include "runtime/train/data_parallel_trainer.h"
#include "worker/job_runner.h"

namespace corescape::worker {

// Connects the job's attention communicator ("<job>/attn": the W workers,
// then the S attention servers of the assignment) and wraps it in a
// DisaggregatedCoreAttention for the trainer. IN_PLACE jobs get
// ConnectInPlaceAttention's executor instead (in_place_attention.h).
absl::StatusOr<std::shared_ptr<AbortableAttention>> ConnectDisaggregatedAttention(
    comm::Transport* transport, const v1::JobAssignment& assignment,
    const train::TrainerConfig& config, absl::Duration timeout);

}  // namespace corescape::worker

#endif  // CORESCAPE_WORKER_DISAGGREGATED_ATTENTION_H_
