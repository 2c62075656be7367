#ifndef CORESCAPE_SCHEDULER_JOB_MANAGER_H_
#define CORESCAPE_SCHEDULER_JOB_MANAGER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "corescape/v1/job.pb.h"
#include "corescape/v1/node.pb.h"
#include "runtime/base/clock.h"
#include "scheduler/attention_failover.h"
#include "scheduler/event_log.h"
#include "scheduler/list_pages.h"
#include "scheduler/node_registry.h"
#include "scheduler/placement.h"
#include "scheduler/state_store.h"

namespace corescape::scheduler {

// The longest one step may take for the job's throughput: a step time past
// it (a garbled report, a clock jump) counts nothing.
inline constexpr double kMaxStepSeconds = 7 * 24 * 3600.0;

struct JobManagerOptions {
  // A recovering elastic job waits this long for replacements before it
  // shrinks to the workers it has (if placement.min_workers allows).
  absl::Duration elastic_grace = absl::Seconds(5);
  int max_recoveries = 5;
};

// Reports that arrive on node sessions.
class NodeReportSink {
 public:
  virtual ~NodeReportSink() = default;
  virtual void OnStepReport(const std::string& node, uint64_t incarnation,
                            const v1::StepReport& report) = 0;
  virtual void OnJobFailure(const std::string& node, uint64_t incarnation,
                            const v1::JobFailureReport& report) = 0;
};

// Jobs: the queue, gang scheduling, rank assignment with a rendezvous
// generation, and the state machine
//   PENDING → RUNNING → (RECOVERING → RUNNING)* → SUCCEEDED | FAILED | CANCELLED,
// every transition written to the store before it is acknowledged or acted
// on. Reconcile(), called periodically, snapshots the registry and the
// jobs, lets PlaceJobs (scheduler/placement.h) decide — a dead worker means
// recovery; a DISAGGREGATED job that only lost attention servers stays
// RUNNING, re-planned in a new attention epoch — and records each decision
// before it pushes the assignments and stops.
class JobManager : public NodeReportSink {
 public:
  JobManager(const Clock* clock, StateStore* store, EventLog* events,
             NodeRegistry* registry, JobManagerOptions options = {});

  absl::Status Load();

  // `submitted_by`: the submitter's identity, recorded on the job.
  absl::StatusOr<v1::Job> Submit(const v1::SubmitJobRequest& request,
                                 const std::string& submitted_by = "");
  absl::StatusOr<v1::Job> Get(const std::string& job_id) const;
  std::vector<v1::Job> List(const std::vector<v1::JobState>& states, int limit) const;
  // One page of List's order (newest first) of at most `page_size` jobs
  // (ResolvePageSize); INVALID_ARGUMENT naming page_token for a bad token.
  absl::StatusOr<Page<v1::Job>> ListPage(const std::vector<v1::JobState>& states,
                                         int page_size, const std::string& page_token) const;
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id, const std::string& reason);

  // Events of a job with sequence > after (state changes and progress).
  absl::StatusOr<std::vector<v1::JobEvent>> EventsAfter(const std::string& job_id,
                                                        uint64_t after) const;
  void WaitForEvents(const std::string& job_id, uint64_t after, absl::Duration timeout) const;
  static bool IsFinal(v1::JobState state);

  void Reconcile();

  void OnStepReport(const std::string& node, uint64_t incarnation,
                    const v1::StepReport& report) override;
  void OnJobFailure(const std::string& node, uint64_t incarnation,
                    const v1::JobFailureReport& report) override;

  int CountInState(v1::JobState state) const;
  // Jobs PENDING that `submitted_by` submitted.
  int CountPendingSubmittedBy(const std::string& submitted_by) const;
  // The RUNNING job each of its nodes (workers and attention servers) works
  // for, by node name: what ListNodes shows as current_job_id.
  std::map<std::string, std::string> RunningJobsByNode() const;

  // Retention: the events, idempotency keys and data-plane secret of jobs
  // that ended more than `retention` ago are deleted, each job's in one
  // store transaction, and only then forgotten in memory (the job record
  // itself stays, for `corescape jobs`). Resubmitting a pruned key makes a
  // new job. Returns how many jobs were pruned.
  int PruneFinished(absl::Duration retention);

 private:
  struct UnrecordedReport {
    uint64_t generation = 0;
    bool succeeded = false;  // else: a failure, with recovery
    std::string reason;
  };
  struct JobRecord {
    v1::Job job;
    std::string token;
    absl::Time recovering_since;
    std::vector<v1::JobEvent> events;
    // After a worker's failure report: the failed generation's workers and
    // when it came. Until one of them heartbeats again it may be the dead
    // peer the report is about (its lease has not expired yet), so the
    // recovery does not place the job on it. Cleared by the next Assign.
    std::vector<std::string> reported_failed_nodes;
    absl::Time reported_failure_at = absl::InfinitePast();
    // Rank 0's previous step report of the current generation: when it
    // came and its step. The job's throughput counts the time between
    // reports (memory only: after a restart the next report starts anew).
    absl::Time last_report_at = absl::InfinitePast();
    uint64_t last_report_generation = 0;
    int64_t last_report_step = 0;
    // The checkpoint step the current generation was told to resume from,
    // until rank 0 says which one it restored (memory only: after a
    // restart nobody waits for it).
    std::optional<int64_t> awaiting_restore_of;
    // A member's success or failure report the store refused to record:
    // its sender will not repeat it, so Reconcile retries the transition.
    std::optional<UnrecordedReport> unrecorded_report;
  };

  // The jobs in `states` (all if empty) in List's order.
  std::vector<const v1::Job*> Listed(const std::vector<v1::JobState>& states) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What PlaceJobs decides over: the registry and the jobs not yet final.
  PlacementSnapshot Snapshot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each records the decision, then acts on it; a decision whose job is no
  // longer in the state it was made for (an earlier write failed) is skipped.
  void Apply(const RecoverJob& decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Apply(const ReplanAttention& decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Apply(const AssignJob& decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Apply(const WaitingReason& decision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status Persist(const v1::Job& job);
  // Gives `event` the record's next sequence, the time and the job.
  void StampEvent(const JobRecord& record, v1::JobEvent& event) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AppendEvent(JobRecord& record, v1::JobEvent event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rank 0's first report of a generation that resumed from a checkpoint:
  // an event naming the step it restored (older than asked when newer
  // checkpoints failed verification, which the job's progress then says).
  void RecordRestore(JobRecord& record, const v1::StepReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `updated` to the store, then makes it the record's job; false,
  // with the record unchanged, if the store refused.
  bool Commit(JobRecord& record, v1::Job updated) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the job (as `updated`, else as it is) to `state` durably, with an
  // event; false if the store refused (the transition is retried by the
  // next Reconcile).
  bool Transition(JobRecord& record, v1::Job updated, v1::JobState state,
                  const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Transition(JobRecord& record, v1::JobState state, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the job to recovery.state durably, then StopJob (with `cause`) to
  // every node of the job; false, with nothing sent, if the store refused.
  bool StartRecovery(JobRecord& record, const std::string& cause, const Recovery& recovery)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SUCCEEDED durably, then the attention servers are stopped.
  bool FinishSucceeded(JobRecord& record, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds rank 0's step `report`, received `now`, to the job's throughput
  // (JobProgress.tokens_trained, steps_seconds, steps_timed).
  void CountStepTime(JobRecord& record, const v1::StepReport& report, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetryUnrecordedReports() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Job::assigned_nodes lists the workers by rank, then (DISAGGREGATED
  // jobs) the attention servers.
  void Assign(JobRecord& record, const AssignJob& placement) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends assignments[r] to workers[r] (r < W), then to servers[r − W].
  void PushAssignments(const std::vector<v1::JobAssignment>& assignments,
                       const std::vector<v1::NodeInfo>& workers,
                       const std::vector<v1::NodeInfo>& servers);
  void StopAttentionServers(const JobRecord& record, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long a participant whose attention failed waits for the re-plan:
  // the scheduler notices a dead server within a lease.
  absl::Duration AttentionFailoverTimeout() const;
  // StopJob for the job's current generation to one node.
  void PushStopJob(const v1::Job& job, const std::string& node, uint64_t incarnation,
                   const std::string& reason);
  void StopNodes(const JobRecord& record, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  JobRecord* Find(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* clock_;
  StateStore* store_;
  EventLog* events_;
  NodeRegistry* registry_;
  const JobManagerOptions options_;

  mutable absl::Mutex mu_;
  std::map<std::string, JobRecord> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> idempotency_keys_ ABSL_GUARDED_BY(mu_);
  uint64_t next_job_number_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_JOB_MANAGER_H_
