#ifndef CORESCAPE_RUNTIME_JOB_JOB_COMMUNICATOR_H_
#define CORESCAPE_RUNTIME_JOB_JOB_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "corescape/v1/node.pb.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/transport.h"
#include "runtime/train/communicator_group.h"

namespace corescape::job {

// The communicators a job assignment's participants connect, each on the
// node's one Transport.
enum class JobCommunicator {
  // "<job>": the W workers' data-parallel group (ranks = worker ranks).
  kDataParallel,
  // DISAGGREGATED jobs: the workers (ranks 0..W-1) then the attention
  // servers (W..W+S-1); the id includes the attention epoch
  // (attention::AttentionCommunicatorId), so stale participants of an
  // earlier epoch are refused.
  kAttention,
  // IN_PLACE jobs: "<job>/attn-inplace", the W workers over their data
  // addresses, next to the data-parallel one.
  kInPlaceAttention,
  // "<job>/control": the W workers' trainer collectives (token counts,
  // losses), so that the data-parallel group carries the optimizer's alone.
  kControl,
};

// The options of `which` as every participant builds them from its
// assignment: its rank, the peers' data addresses, the job's generation and
// token, and the communicator's id.
comm::CommunicatorOptions JobCommunicatorOptions(const v1::JobAssignment& assignment,
                                                 JobCommunicator which, absl::Duration timeout);

// A worker's data-parallel group of the job: kDataParallel for the
// optimizer, kControl its control channel.
absl::StatusOr<std::unique_ptr<train::CommunicatorGroup>> ConnectDataParallelGroup(
    comm::Transport* transport, const v1::JobAssignment& assignment, absl::Duration timeout);

}  // namespace corescape::job

#endif  // CORESCAPE_RUNTIME_JOB_JOB_COMMUNICATOR_H_
