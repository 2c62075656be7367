#ifndef CORESCAPE_SCHEDULER_ATTENTION_PLANNING_H_
#define CORESCAPE_SCHEDULER_ATTENTION_PLANNING_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "corescape/v1/common.pb.h"
#include "corescape/v1/job.pb.h"
#include "corescape/v1/node.pb.h"
#include "runtime/base/clock.h"
#include "scheduler/attention_plan_builder.h"
#include "scheduler/attention_speeds.h"
#include "scheduler/attention_weight_pushes.h"

namespace corescape::scheduler {

// Core-attention reports that arrive on node sessions. A refused report is
// an error naming the field; the session logs it and carries on.
class AttentionReportSink {
 public:
  virtual ~AttentionReportSink() = default;
  virtual absl::Status OnAttentionDemand(const std::string& node, uint64_t incarnation,
                                         const v1::AttentionDemand& demand) = 0;
  virtual absl::Status OnAttentionTiming(const std::string& node, uint64_t incarnation,
                                         const v1::AttentionTaskTiming& timing) = 0;
};

struct AttentionPlanningOptions {
  double speed_smoothing = 0.3;  // weight of the newest timing in a server's speed
  int max_pending_steps = 8;     // per job: steps still missing some worker's demand
  int max_jobs = 256;            // jobs whose latest demand and plan are kept
  WeightPushOptions weight_pushes;
};

// The scheduler's side of core-attention planning for DISAGGREGATED jobs.
//
// Workers report the document lengths of every core-attention micro-batch
// of an upcoming step (AttentionDemand, for step s+1 while step s runs);
// once every worker rank of the job has reported a step in the job's
// current generation and attention epoch, each of its micro-batches is
// planned with the participants' own planner and options
// (attention_plan_builder.h) over the job's ALIVE attention servers — dead,
// draining or restarted ones are left out — weighted by their learned
// speeds. A RUNNING job's worker rank 0 gets those plans in one
// AttentionStepPlan (via `push`), with servers named by their index in the
// attention epoch, and ships them to the participants, which use them
// instead of planning themselves when they match (docs/disaggregation.md).
// Attention servers report what each micro-batch cost them
// (AttentionTaskTiming); ServerSpeedEstimates turns that into speeds.
//
// The participants plan themselves, when they have no matching step plan,
// with the speed weights the scheduler pushes to the job's workers
// (AttentionSpeedWeights, via `push`): when a timing moves the weights of
// the job's current servers materially (rate-limited,
// attention_weight_pushes.h) and on Rebalance. The plan kept here is the
// first micro-batch's of the newest step, for operators (`corescape plan`).
class AttentionPlanning final : public AttentionReportSink {
 public:
  using JobLookup = std::function<absl::StatusOr<v1::Job>(const std::string& job_id)>;
  using NodeLookup = std::function<absl::StatusOr<v1::NodeInfo>(const std::string& name)>;
  // Queues a command on a node's session (NodeRegistry::Push).
  using CommandPusher = std::function<absl::Status(
      const std::string& node, uint64_t incarnation, const v1::SchedulerCommand& command)>;

  // `push` may be null: no speed weights or step plans are sent then.
  AttentionPlanning(JobLookup jobs, NodeLookup nodes, const Clock* clock,
                    AttentionPlanningOptions options = {}, CommandPusher push = nullptr);

  absl::Status OnAttentionDemand(const std::string& node, uint64_t incarnation,
                                 const v1::AttentionDemand& demand) override;
  absl::Status OnAttentionTiming(const std::string& node, uint64_t incarnation,
                                 const v1::AttentionTaskTiming& timing) override;

  // The newest plan of the job. NOT_FOUND naming the job if the scheduler
  // has no such job; FAILED_PRECONDITION if it is not DISAGGREGATED or no
  // step of it has been planned yet.
  absl::StatusOr<v1::AttentionPlan> LatestPlan(const std::string& job_id) const;

  // Re-derives the speed weights from the timings now, re-plans the job's
  // newest demand with them and keeps that plan; a RUNNING job's workers
  // get the weights at once (pushed_weights_version). Errors as LatestPlan,
  // and FAILED_PRECONDITION when none of its servers is ALIVE.
  absl::StatusOr<v1::AttentionPlan> Replan(const std::string& job_id);

  // Replan for one job, or (empty job_id) for every RUNNING job with a
  // demand on record; jobs that cannot be re-planned are skipped then.
  absl::StatusOr<std::vector<v1::AttentionPlan>> Rebalance(const std::string& job_id);

 private:
  // One rank's micro-batches of a step: [micro-batch][document].
  using RankDemand = std::vector<std::vector<int64_t>>;
  struct Demand {
    uint64_t generation = 0;
    uint64_t attention_epoch = 0;
    int64_t step = 0;
    // [micro-batch][rank][document]. The one JobState keeps has the first
    // micro-batch only: Replan plans that one.
    std::vector<std::vector<std::vector<int64_t>>> micro_batches;
  };
  struct JobState {
    // Pending steps belong to one generation and attention epoch: after a
    // failover the workers report the steps being redone afresh.
    uint64_t generation = 0;
    uint64_t attention_epoch = 0;
    // Steps waiting for the rest of the workers: [step][rank], nullopt until
    // that rank reported.
    std::map<int64_t, std::vector<std::optional<RankDemand>>> pending;
    std::optional<Demand> demand;  // the newest complete one
    std::optional<v1::AttentionPlan> plan;
    // Step plans sent in this generation and epoch: the first and every
    // 100th are logged, one line per step would flood the log.
    int64_t step_plans_sent = 0;
    absl::Time touched;
  };
  // The job's servers a plan may use: the ALIVE ones with their current
  // weights, and the others as "name (why)".
  struct Servers {
    std::vector<PlannedServer> planned;
    std::vector<std::string> excluded;
  };

  // The job, checked to be DISAGGREGATED; `field` prefixes the errors.
  absl::StatusOr<v1::Job> FindDisaggregatedJob(const std::string& job_id,
                                               const std::string& field) const;
  // Records `demand` (validated); the step's micro-batches once every worker
  // rank reported it.
  absl::StatusOr<std::optional<Demand>> Collect(const v1::Job& job,
                                                const v1::AttentionDemand& demand)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The servers `job`'s plans may use now (no lock held: it calls the
  // lookups). FAILED_PRECONDITION when none is ALIVE.
  absl::StatusOr<Servers> PlanServers(const v1::Job& job) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends rank 0 of a RUNNING `job` the step plan made over `servers`;
  // whether it was queued.
  bool SendStepPlan(const v1::Job& job, const std::vector<PlannedServer>& servers,
                    v1::AttentionStepPlan step_plan) ABSL_LOCKS_EXCLUDED(mu_, push_mu_);
  // Keeps `plan` unless a newer one (generation, epoch, step) is already kept.
  void KeepPlan(const std::string& job_id, v1::AttentionPlan plan) ABSL_LOCKS_EXCLUDED(mu_);
  void EvictOldJobs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the job's workers its current servers' speed weights when
  // SpeedWeightPushes says so (always when `forced`); returns the version
  // sent, 0 if none.
  uint64_t PushSpeedWeights(const v1::Job& job, bool forced)
      ABSL_LOCKS_EXCLUDED(mu_, push_mu_);

  const JobLookup jobs_;
  const NodeLookup nodes_;
  const Clock* const clock_;
  const AttentionPlanningOptions options_;
  const CommandPusher push_;

  // Held across deciding and sending a push, so each worker's session
  // gets a job's weight versions in order, and a step plan only after the
  // weights whose version it names. Taken before mu_.
  absl::Mutex push_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<std::string, JobState> states_ ABSL_GUARDED_BY(mu_);
  ServerSpeedEstimates speeds_ ABSL_GUARDED_BY(mu_);
  SpeedWeightPushes pushes_ ABSL_GUARDED_BY(mu_);
};

// Worker ranks of a job: its assigned nodes minus its attention servers
// (AssignedAttentionServers: fewer than the spec's after a failover).
int32_t JobWorkerCount(const v1::Job& job);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_ATTENTION_PLANNING_H_
