#ifndef CORESCAPE_RUNTIME_CONTROL_ATTENTION_COMMUNICATOR_H_
#define CORESCAPE_RUNTIME_CONTROL_ATTENTION_COMMUNICATOR_H_

#include "absl/time/time.h"
#include "corescape/v1/node.pb.h"
#include "runtime/comm/communicator.h"

namespace corescape {

// The options of a DISAGGREGATED job's attention communicator as its
// workers (ranks 0..W-1) and attention servers (W..W+S-1) both build it
// from their assignment: every worker's then every server's data address,
// the job's token, and an id that includes the attention epoch, so stale
// participants of an earlier epoch are refused.
comm::CommunicatorOptions AttentionCommunicatorOptions(const v1::JobAssignment& assignment,
                                                       absl::Duration timeout);

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_CONTROL_ATTENTION_COMMUNICATOR_H_
