#ifndef CORESCAPE_ATTENTION_SERVER_ATTENTION_TIMING_REPORTS_H_
#define CORESCAPE_ATTENTION_SERVER_ATTENTION_TIMING_REPORTS_H_

#include "corescape/v1/node.pb.h"
#include "runtime/attention/attention_server_session.h"

namespace corescape::attention_server {

// The AttentionTaskTiming an attention server sends on its session after
// each micro-batch it computed, from which the scheduler learns its speed
// (scheduler/attention_speeds.h). Servers do not know step numbers: step
// stays 0, micro_batch says which one it was.
v1::NodeMessage AttentionTimingMessage(const v1::JobAssignment& assignment,
                                       const attention::MicroBatchTiming& timing);

}  // namespace corescape::attention_server

#endif  // CORESCAPE_ATTENTION_SERVER_ATTENTION_TIMING_REPORTS_H_
