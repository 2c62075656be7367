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
// Workers report the document lengths of each step's first micro-batch
// (AttentionDemand); once every worker rank of the job has reported a step,
// the step is planned with the participants' own planner and options
// (attention_plan_builder.h) over the job's ALIVE attention servers — dead,
// draining or restarted ones are left out — weighted by their learned
// speeds. Attention servers report what each micro-batch cost them
// (AttentionTaskTiming); ServerSpeedEstimates turns that into speeds.
//
// The participants plan every micro-batch themselves (docs/
// disaggregation.md), with the speed weights the scheduler pushes to the
// job's workers (AttentionSpeedWeights, via `push`): when a timing moves
// the weights of the job's current servers materially (rate-limited,
// attention_weight_pushes.h) and on Rebalance. The plan kept here is the
// scheduler's view of a step with those weights, for operators (`corescape
// plan`).
class AttentionPlanning final : public AttentionReportSink {
 public:
  using JobLookup = std::function<absl::StatusOr<v1::Job>(const std::string& job_id)>;
  using NodeLookup = std::function<absl::StatusOr<v1::NodeInfo>(const std::string& name)>;
  // Queues a command on a node's session (NodeRegistry::Push).
  using CommandPusher = std::function<absl::Status(
      const std::string& node, uint64_t incarnation, const v1::SchedulerCommand& command)>;

  // `push` may be null: no speed weights are sent then.
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
  struct Demand {
    uint64_t generation = 0;
    int64_t step = 0;
    std::vector<std::vector<int64_t>> worker_documents;  // [rank][document]
  };
  struct JobState {
    uint64_t generation = 0;
    // Steps waiting for the rest of the workers: [step][rank], nullopt until
    // that rank reported.
    std::map<int64_t, std::vector<std::optional<std::vector<int64_t>>>> pending;
    std::optional<Demand> demand;  // the newest complete one
    std::optional<v1::AttentionPlan> plan;
    absl::Time touched;
  };

  // The job, checked to be DISAGGREGATED; `field` prefixes the errors.
  absl::StatusOr<v1::Job> FindDisaggregatedJob(const std::string& job_id,
                                               const std::string& field) const;
  // Plans `demand` of `job` over its ALIVE servers with their current
  // weights (no lock held: it calls the lookups and the planner).
  absl::StatusOr<v1::AttentionPlan> Plan(const v1::Job& job, const Demand& demand)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `plan` unless a newer one (generation, step) is already kept.
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
  // gets a job's versions in order. Taken before mu_.
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
