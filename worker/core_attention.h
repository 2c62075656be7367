#ifndef CORESCAPE_WORKER_CORE_ATTENTION_H_
#define CORESCAPE_WORKER_CORE_ATTENTION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "corescape/v1/node.pb.h"
#include "runtime/attention/remote_core_attention.h"
#include "runtime/comm/transport.h"
#include "runtime/train/data_parallel_trainer.h"

namespace corescape::worker {

// Connects the core-attention executor of the job's attention mode for the
// trainer:
// - DISAGGREGATED: the attention communicator ("<job>/attn": the W workers,
//   then the S attention servers of the assignment) wrapped in a
//   DisaggregatedCoreAttention; the assignment must name servers;
// - IN_PLACE: the in-place communicator ("<job>/attn-inplace": the W workers
//   over their data addresses, next to the data-parallel "<job>") wrapped in
//   an InPlaceCoreAttention; the assignment must name no servers.
// InvalidArgument for any other mode.
absl::StatusOr<std::shared_ptr<attention::RemoteCoreAttention>> ConnectCoreAttention(
    comm::Transport* transport, const v1::JobAssignment& assignment,
    const train::TrainerConfig& config, absl::Duration timeout);

}  // namespace corescape::worker

#endif  // CORESCAPE_WORKER_CORE_ATTENTION_H_
