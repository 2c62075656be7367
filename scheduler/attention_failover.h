#ifndef CORESCAPE_SCHEDULER_ATTENTION_FAILOVER_H_
#define CORESCAPE_SCHEDULER_ATTENTION_FAILOVER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "corescape/v1/job.pb.h"
#include "corescape/v1/node.pb.h"

namespace corescape::scheduler {

// Losing an attention server of a RUNNING DISAGGREGATED job costs a step,
// not a restart: the scheduler re-plans the job over the servers it still
// has (plus free replacements) in a new attention epoch and re-sends every
// worker and server its assignment; the generation and the data-parallel
// group stay. These are the pure parts of that (docs/disaggregation.md).

// How many of job.assigned_nodes are attention servers (they follow the
// workers). Records written before the count was kept: the spec's number.
int AssignedAttentionServers(const v1::Job& job);

struct LostAttentionServer {
  int index = 0;      // among the job's servers (attention rank W + index)
  std::string name;
  std::string why;    // "attention server 0 (a0) is DEAD"
  // Still running (drained): told to leave the job once it is re-planned.
  bool reachable = false;
  uint64_t incarnation = 0;
};

// The job's attention servers to plan without: vanished from the registry,
// DEAD, DEREGISTERED, restarted (another incarnation: its session state is
// gone), or DRAINING (an operator asked for it back). `nodes`: the registry by name.
std::vector<LostAttentionServer> FindLostAttentionServers(
    const v1::Job& job, const std::map<std::string, v1::NodeInfo>& nodes);

// Every participant's assignment for the job's current attention epoch (on
// starting the job and on re-planning its attention servers), by attention
// rank: workers 0..W-1 (rank r of W, their data-parallel group), then
// servers W..W+S-1 (of W+S). The workers' and servers' data addresses come
// from `workers` and `servers`; their data-plane secret is the generation's
// (GenerationSecret of `job_secret`).
std::vector<v1::JobAssignment> ParticipantAssignments(
    const v1::Job& job, const std::string& job_secret,
    const std::vector<v1::NodeInfo>& workers, const std::vector<v1::NodeInfo>& servers,
    absl::Duration failover_timeout);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_ATTENTION_FAILOVER_H_
