#ifndef CORESCAPE_WORKER_IN_PLACE_ATTENTION_H_
#define CORESCAPE_WORKER_IN_PLACE_ATTENTION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "corescape/v1/node.pb.h"
#include "runtime/comm/transport.h"
#include "runtime/train/data_parallel_trainer.h"
#include "worker/job_runner.h"

namespace corescape::worker {

// IN_PLACE jobs: connects the job's in-place attention communicator
// ("<job>/attn-inplace": the W workers over their data addresses, separate
// from the data-parallel "<job>") and wraps it in an InPlaceCoreAttention
// for the trainer. The assignment must name no attention servers.
absl::StatusOr<std::shared_ptr<AbortableAttention>> ConnectInPlaceAttention(
    comm::Transport* transport, const v1::JobAssignment& assignment,
    const train::TrainerConfig& config, absl::Duration timeout);

}  // namespace corescape::worker

#endif  // CORESCAPE_WORKER_IN_PLACE_ATTENTION_H_
