#ifndef CORESCAPE_SCHEDULER_PLACEMENT_H_
#define CORESCAPE_SCHEDULER_PLACEMENT_H_

// Where the scheduler's jobs run. PlaceJobs is pure and deterministic: a
// snapshot of the registry and the jobs in, the decisions out, with no I/O,
// locks or clock (the time is in the snapshot). JobManager::Reconcile takes
// the snapshot, records each decision durably and only then acts on it.
//
// Three steps, each over what the ones before decided:
//
//  1. Failures (observe). A RUNNING job whose worker vanished from the
//     registry, is DEAD or DEREGISTERED, or runs another incarnation (a new
//     process: its state is gone) recovers (RecoveryOf): RECOVERING from the
//     newest checkpoint, or FAILED once it has used max_recoveries. Its
//     nodes are free for step 3 of the same pass. A draining worker keeps
//     its job: draining only stops new work.
//  2. Attention. A RUNNING DISAGGREGATED job that lost attention servers
//     (FindLostAttentionServers: gone, restarted, draining), or has fewer
//     than its spec asks (an earlier loss found no spare), keeps its
//     generation and gets a new attention epoch: the surviving servers in
//     their order, then spares up to max(servers it had, servers its spec
//     asks). Spares are ALIVE attention servers no running job holds, in
//     name order (a restarted server may rejoin as its own replacement);
//     jobs take them in job-id order. Drained servers are told to leave
//     once the epoch is recorded; while nothing replaces them they keep
//     serving (draining must not cost a restart). No server left to plan
//     over: recovery, as in step 1.
//  3. Placement. Waiting jobs (PENDING, RECOVERING), oldest submission
//     first, each on free nodes: ALIVE (neither draining nor dead) and held
//     by no running job. Gang: all the job's workers and, when
//     DISAGGREGATED, all its attention servers at once, or nothing; a job
//     that cannot start holds nothing back from a younger one that can.
//     Workers are taken in name order and get ranks in that order; a pinned
//     job (placement.node_names) takes exactly the nodes it names, ranked as
//     named; servers are taken in name order. A `device: cuda` job takes
//     only workers serving a CUDA GPU (Resources.device; one GPU per worker
//     daemon); a CPU job takes workers serving none first, then GPU ones.
//     A job with a checkpoint directory takes only workers whose
//     checkpoint root (Resources.checkpoint_root) holds it, and every job
//     only workers whose data root (Resources.data_root) holds all its
//     datasets.
//     After a failure report the
//     failed generation's workers that have not heartbeated since the
//     report are not placeable for that job: one of them may be the dead
//     peer the report is about, its lease not yet expired. A RECOVERING
//     elastic job (unpinned, min_workers < workers) that found too few
//     workers and has waited elastic_grace since it started recovering
//     takes the largest world size W' in [min_workers, workers) that the
//     placeable workers allow and that divides workers × gradient
//     accumulation, with accumulation raised to keep the global batch. A
//     PENDING job that cannot start gets the reason, when it changed; a
//     CUDA job's says how many registered workers serve a GPU at all, and
//     one held back by checkpoint or data roots names the roots.
//
// The decisions come in the order to apply them: step 1's, then step 2's
// (job-id order), then step 3's (queue order). Each assumes the ones before
// it were recorded; the job manager skips a decision whose job is no longer
// in the state it was made for (an earlier write failed), and the next pass
// decides again.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "corescape/v1/job.pb.h"
#include "corescape/v1/node.pb.h"
#include "scheduler/attention_failover.h"

namespace corescape::scheduler {

// A job as the job manager holds it.
struct PlacementJob {
  v1::Job job;
  // When it last became RECOVERING: the elastic grace runs from here.
  absl::Time recovering_since = absl::InfinitePast();
  // After a worker's failure report: the failed generation's workers and
  // when the report came (empty once the job is placed again).
  std::vector<std::string> reported_failed_nodes;
  absl::Time reported_failure_at = absl::InfinitePast();
  // Its spec's checkpoint.directory as the scheduler's host resolves it
  // (job::ResolvedPath; empty: it writes no checkpoints), for waiting jobs.
  std::string checkpoint_directory;
};

struct PlacementSnapshot {
  std::vector<v1::NodeInfo> nodes;  // the registry, every state
  std::vector<PlacementJob> jobs;   // final jobs may be left out
  absl::Time now;
};

struct PlacementOptions {
  // A recovering elastic job waits this long for replacements before it
  // shrinks.
  absl::Duration elastic_grace;
  // Recoveries a job may use; the next failure makes it FAILED.
  int max_recoveries = 0;
};

// What a failure does to a job: RECOVERING (one more recovery) or FAILED,
// and the reason to record. `cause` says what broke ("rank 1 (w1) is DEAD").
struct Recovery {
  v1::JobState state = v1::RECOVERING;
  std::string reason;
};
Recovery RecoveryOf(const v1::Job& job, const std::string& cause, int max_recoveries);

// A RUNNING job stops on every node (StopJob with `cause`) and moves to
// recovery.state.
struct RecoverJob {
  std::string job_id;
  std::string cause;
  Recovery recovery;
};

// A RUNNING DISAGGREGATED job continues in the next attention epoch of the
// same generation over `servers`.
struct ReplanAttention {
  std::string job_id;
  std::vector<v1::NodeInfo> workers;  // by rank, unchanged
  std::vector<v1::NodeInfo> servers;  // survivors in their order, then spares
  // Drained servers it no longer uses: told to leave once recorded.
  std::vector<LostAttentionServer> leaving;
  std::string event_node;  // the node the cluster event names
  std::string reason;      // state reason and event message
};

// A waiting job starts its next generation: ranks 0..W-1 on `workers`,
// attention ranks W.. on `servers`.
struct AssignJob {
  std::string job_id;
  std::vector<v1::NodeInfo> workers;
  std::vector<v1::NodeInfo> servers;
  int32_t gradient_accumulation = 1;
};

// A PENDING job keeps waiting, now for this reason.
struct WaitingReason {
  std::string job_id;
  std::string reason;
};

using PlacementDecision = std::variant<RecoverJob, ReplanAttention, AssignJob, WaitingReason>;

// Whether `worker` may write the checkpoints of a job whose resolved
// directory is `directory` (empty: none): its reported root holds it
// (job::ResolvedPathWithin, the worker's own rule), or it reported none (an
// older worker, which still refuses at assignment).
bool HoldsCheckpointDirectory(const v1::NodeInfo& worker, const std::string& directory);

// At submit: INVALID_ARGUMENT naming spec.checkpoint.directory and the roots
// when workers are registered (in any state: a dead one may come back) and
// none holds `directory` (resolved). With none registered yet the job is
// accepted; its PENDING reason says what it waits for.
absl::Status CheckSomeWorkerHoldsCheckpoints(const v1::JobSpec& spec, const std::string& directory,
                                             const std::vector<v1::NodeInfo>& registry);

// Whether `worker` may read all the datasets `data` names (absolute, no
// `..`: ValidateJobSpec): its reported data root holds each, compared as
// written (job::ResolvedPathWithin; the worker resolves them again on its
// host), or it reported none (an older worker, which still refuses at
// assignment).
bool HoldsDatasets(const v1::NodeInfo& worker, const v1::DataSpec& data);

// At submit: INVALID_ARGUMENT naming the first dataset (spec.data.
// train_shards[i] or validation_shards[i]) outside the data root of every
// registered worker, and the roots, or saying that no one root holds them
// all. The scheduler reads no filesystem for it: a path outside the roots is
// refused in the same words whether it exists or not. With no worker
// registered yet the job is accepted; its PENDING reason says what it waits
// for.
absl::Status CheckSomeWorkerHoldsDatasets(const v1::JobSpec& spec,
                                          const std::vector<v1::NodeInfo>& registry);

std::vector<PlacementDecision> PlaceJobs(const PlacementSnapshot& snapshot,
                                         const PlacementOptions& options);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_PLACEMENT_H_
