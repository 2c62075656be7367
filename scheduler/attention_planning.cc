#include "scheduler/attention_planning.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "scheduler/attention_failover.h"

namespace corescape::scheduler {
namespace {

// Bounds on a demand, far above any real micro-batch; they keep one bad
// report from making the scheduler allocate or plan without limit.
constexpr int kMaxDocumentsPerDemand = 1 << 20;
constexpr int64_t kMaxDocumentLength = int64_t{1} << 32;  // as the servers check

int32_t AttentionServerCount(const v1::Job& job) {
  if (job.assigned_nodes_size() == 0) return 0;  // not placed
  return std::min(AssignedAttentionServers(job), job.assigned_nodes_size());
}

bool IsNewer(const v1::AttentionPlan& a, const v1::AttentionPlan& b) {
  return std::make_tuple(a.generation(), a.step(), a.planned_unix_ms()) >
         std::make_tuple(b.generation(), b.step(), b.planned_unix_ms());
}

}  // namespace

int32_t JobWorkerCount(const v1::Job& job) {
  return job.assigned_nodes_size() - AttentionServerCount(job);
}

AttentionPlanning::AttentionPlanning(JobLookup jobs, NodeLookup nodes, const Clock* clock,
                                     AttentionPlanningOptions options, CommandPusher push)
    : jobs_(std::move(jobs)),
      nodes_(std::move(nodes)),
      clock_(clock),
      options_(options),
      push_(std::move(push)),
      speeds_(options.speed_smoothing),
      pushes_(options.weight_pushes) {}

absl::StatusOr<v1::Job> AttentionPlanning::FindDisaggregatedJob(const std::string& job_id,
                                                                const std::string& field) const {
  if (job_id.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty"));
  auto job = jobs_(job_id);
  if (!job.ok()) {
    if (absl::IsNotFound(job.status())) {
      return absl::NotFoundError(absl::StrCat(field, ": no job '", job_id, "'"));
    }
    return job.status();
  }
  if (job->spec().attention().mode() != v1::DISAGGREGATED) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, ": job ", job_id, " runs attention ",
        v1::AttentionMode_Name(job->spec().attention().mode()),
        ", not DISAGGREGATED: it has no attention servers to plan for"));
  }
  return job;
}

absl::Status AttentionPlanning::OnAttentionDemand(const std::string& node, uint64_t incarnation,
                                                  const v1::AttentionDemand& demand) {
  auto job = FindDisaggregatedJob(demand.job_id(), "attention_demand.job_id");
  if (!job.ok()) return job.status();
  if (demand.generation() != job->generation()) {
    return absl::FailedPreconditionError(
        absl::StrCat("attention_demand.generation: ", demand.generation(), ", but job ",
                     job->job_id(), " is at generation ", job->generation()));
  }
  const int32_t workers = JobWorkerCount(*job);
  if (demand.rank() < 0 || demand.rank() >= workers) {
    return absl::InvalidArgumentError(absl::StrCat("attention_demand.rank: ", demand.rank(),
                                                   " is not a worker rank of job ", job->job_id(),
                                                   " (it has ", workers, " workers)"));
  }
  if (job->assigned_nodes(demand.rank()) != node ||
      job->assigned_incarnations(demand.rank()) != incarnation) {
    return absl::PermissionDeniedError(absl::StrCat(
        "attention_demand.rank: rank ", demand.rank(), " of job ", job->job_id(), " is ",
        job->assigned_nodes(demand.rank()), " incarnation ",
        job->assigned_incarnations(demand.rank()), ", not ", node, " incarnation ", incarnation));
  }
  if (demand.step() < 1 || demand.step() > job->spec().steps()) {
    return absl::InvalidArgumentError(absl::StrCat("attention_demand.step: ", demand.step(),
                                                   " is not in [1, ", job->spec().steps(), "]"));
  }
  if (demand.document_lengths_size() > kMaxDocumentsPerDemand) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_demand.document_lengths: ", demand.document_lengths_size(),
                     " documents, more than ", kMaxDocumentsPerDemand));
  }
  for (int d = 0; d < demand.document_lengths_size(); ++d) {
    const int64_t length = demand.document_lengths(d);
    if (length < 1 || length > kMaxDocumentLength) {
      return absl::InvalidArgumentError(absl::StrCat("attention_demand.document_lengths[", d,
                                                     "]: ", length, " is not in [1, 2^32]"));
    }
  }

  Demand complete;
  {
    absl::MutexLock lock(&mu_);
    JobState& state = states_[job->job_id()];
    state.touched = clock_->Now();
    if (job->generation() > state.generation) {
      state.generation = job->generation();
      state.pending.clear();  // the ranks of an older generation never finish them
    }
    // The newest planned step may come again: a step redone after an
    // attention failover is planned anew over the servers left.
    if (state.demand && state.demand->generation == job->generation() &&
        demand.step() < state.demand->step) {
      return absl::FailedPreconditionError(
          absl::StrCat("attention_demand.step: ", demand.step(), " of job ", job->job_id(),
                       " arrived after the newer step ", state.demand->step, " was planned"));
    }
    auto& ranks = state.pending[demand.step()];
    ranks.resize(workers);
    ranks[demand.rank()].emplace(demand.document_lengths().begin(),
                                 demand.document_lengths().end());
    const bool all_reported = std::all_of(ranks.begin(), ranks.end(),
                                          [](const auto& lengths) { return lengths.has_value(); });
    if (!all_reported) {
      // A worker that never reports must not make the others' steps pile up.
      while (static_cast<int>(state.pending.size()) > options_.max_pending_steps) {
        state.pending.erase(state.pending.begin());
      }
      EvictOldJobs();
      return absl::OkStatus();
    }
    complete.generation = job->generation();
    complete.step = demand.step();
    for (auto& lengths : ranks) complete.worker_documents.push_back(*std::move(lengths));
    // This step and every older one are settled.
    state.pending.erase(state.pending.begin(), state.pending.upper_bound(demand.step()));
    state.demand = complete;
    EvictOldJobs();
  }
  auto plan = Plan(*job, complete);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat("planning step ", complete.step, " of job ", job->job_id(),
                                     ": ", plan.status().message()));
  }
  KeepPlan(job->job_id(), *std::move(plan));
  return absl::OkStatus();
}

absl::Status AttentionPlanning::OnAttentionTiming(const std::string& node, uint64_t incarnation,
                                                  const v1::AttentionTaskTiming& timing) {
  auto job = FindDisaggregatedJob(timing.job_id(), "attention_timing.job_id");
  if (!job.ok()) return job.status();
  if (timing.generation() != job->generation()) {
    return absl::FailedPreconditionError(
        absl::StrCat("attention_timing.generation: ", timing.generation(), ", but job ",
                     job->job_id(), " is at generation ", job->generation()));
  }
  bool serves_job = false;
  for (int rank = JobWorkerCount(*job); rank < job->assigned_nodes_size(); ++rank) {
    serves_job = serves_job || (job->assigned_nodes(rank) == node &&
                                job->assigned_incarnations(rank) == incarnation);
  }
  if (!serves_job) {
    return absl::PermissionDeniedError(absl::StrCat("attention_timing: ", node, " incarnation ",
                                                    incarnation, " is not an attention server of job ",
                                                    job->job_id(), " generation ",
                                                    job->generation()));
  }
  if (!(std::isfinite(timing.cost_units()) && timing.cost_units() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_timing.cost_units: ", timing.cost_units(), " is not > 0"));
  }
  if (!(std::isfinite(timing.seconds()) && timing.seconds() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_timing.seconds: ", timing.seconds(), " is not > 0"));
  }
  if (timing.step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_timing.step: ", timing.step(), " is negative"));
  }
  if (timing.micro_batch() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_timing.micro_batch: ", timing.micro_batch(), " is negative"));
  }
  {
    absl::MutexLock lock(&mu_);
    speeds_.Record(node, incarnation, timing.cost_units(), timing.seconds());
  }
  PushSpeedWeights(*job, /*forced=*/false);
  return absl::OkStatus();
}

uint64_t AttentionPlanning::PushSpeedWeights(const v1::Job& job, bool forced) {
  const int32_t workers = JobWorkerCount(job);
  if (push_ == nullptr || job.state() != v1::RUNNING || workers == job.assigned_nodes_size()) {
    return 0;
  }
  absl::MutexLock push_lock(&push_mu_);
  std::optional<v1::AttentionSpeedWeights> weights;
  {
    absl::MutexLock lock(&mu_);
    // Kept and evicted with the job's other planning state.
    states_[job.job_id()].touched = clock_->Now();
    EvictOldJobs();
    // Every server of the attention epoch, in the participants' order: the
    // participants plan over all of them (a dead one is re-planned away by
    // JobManager, with a new epoch).
    std::vector<std::optional<double>> speeds;
    for (int rank = workers; rank < job.assigned_nodes_size(); ++rank) {
      speeds.push_back(speeds_.Speed(job.assigned_nodes(rank), job.assigned_incarnations(rank)));
    }
    weights = pushes_.Next(job.job_id(), job.generation(), job.attention_epoch(),
                           NormalisedSpeedWeights(speeds), clock_->Now(), forced);
  }
  if (!weights) return 0;
  v1::SchedulerCommand command;
  *command.mutable_attention_weights() = *weights;
  for (int rank = 0; rank < workers; ++rank) {
    if (absl::Status s = push_(job.assigned_nodes(rank), job.assigned_incarnations(rank), command);
        !s.ok()) {
      // The worker is gone: the job recovers without it, nothing to retry.
      LOG(WARNING) << "attention speed weights of job " << job.job_id() << " not sent to "
                   << job.assigned_nodes(rank) << ": " << s;
    }
  }
  LOG(INFO) << "job " << job.job_id() << " generation " << job.generation()
            << " attention epoch " << job.attention_epoch() << ": sent speed weights version "
            << weights->version() << " (" << absl::StrJoin(weights->weights(), ", ")
            << ") to " << workers << " workers" << (forced ? " (rebalance)" : "");
  return weights->version();
}

absl::StatusOr<v1::AttentionPlan> AttentionPlanning::Plan(const v1::Job& job,
                                                          const Demand& demand) {
  struct Candidate {
    PlannedServer server;
    uint64_t incarnation = 0;
  };
  std::vector<Candidate> live;
  std::vector<std::string> excluded;
  for (int rank = JobWorkerCount(job); rank < job.assigned_nodes_size(); ++rank) {
    const std::string& name = job.assigned_nodes(rank);
    auto node = nodes_(name);
    std::string why;
    if (!node.ok()) {
      why = "unknown";
    } else if (node->incarnation() != job.assigned_incarnations(rank)) {
      why = "restarted";
    } else if (node->state() != v1::ALIVE) {
      why = v1::NodeState_Name(node->state());
    }
    if (!why.empty()) {
      excluded.push_back(absl::StrCat(name, " (", why, ")"));
      continue;
    }
    Candidate candidate;
    candidate.server.name = name;
    candidate.server.address = node->data_address();
    candidate.incarnation = node->incarnation();
    live.push_back(std::move(candidate));
  }
  if (live.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.job_id(), " has no ALIVE attention server to plan over (",
                     absl::StrJoin(excluded, ", "), ")"));
  }
  std::vector<std::optional<double>> speeds;
  {
    absl::MutexLock lock(&mu_);
    for (const Candidate& c : live) speeds.push_back(speeds_.Speed(c.server.name, c.incarnation));
  }
  const std::vector<double> weights = NormalisedSpeedWeights(speeds);
  std::vector<PlannedServer> servers;
  for (size_t s = 0; s < live.size(); ++s) {
    PlannedServer server = live[s].server;
    server.speed_weight = weights[s];
    server.measured_speed = speeds[s].value_or(0.0);
    servers.push_back(std::move(server));
  }
  return BuildAttentionPlan(job, demand.step, demand.worker_documents, servers, excluded,
                            clock_->Now());
}

void AttentionPlanning::KeepPlan(const std::string& job_id, v1::AttentionPlan plan) {
  absl::MutexLock lock(&mu_);
  JobState& state = states_[job_id];
  if (state.plan && IsNewer(*state.plan, plan)) return;
  state.plan = std::move(plan);
}

void AttentionPlanning::EvictOldJobs() {
  while (static_cast<int>(states_.size()) > options_.max_jobs) {
    auto oldest = states_.begin();
    for (auto it = states_.begin(); it != states_.end(); ++it) {
      if (it->second.touched < oldest->second.touched) oldest = it;
    }
    pushes_.Forget(oldest->first);
    states_.erase(oldest);
  }
}

absl::StatusOr<v1::AttentionPlan> AttentionPlanning::LatestPlan(const std::string& job_id) const {
  auto job = FindDisaggregatedJob(job_id, "job_id");
  if (!job.ok()) return job.status();
  absl::MutexLock lock(&mu_);
  auto it = states_.find(job_id);
  if (it == states_.end() || !it->second.plan) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " (", v1::JobState_Name(job->state()),
        ") has no planned step yet: its workers report each step's document lengths once "
        "it runs"));
  }
  return *it->second.plan;
}

absl::StatusOr<v1::AttentionPlan> AttentionPlanning::Replan(const std::string& job_id) {
  auto job = FindDisaggregatedJob(job_id, "job_id");
  if (!job.ok()) return job.status();
  Demand demand;
  {
    absl::MutexLock lock(&mu_);
    auto it = states_.find(job_id);
    if (it == states_.end() || !it->second.demand) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", job_id, " (", v1::JobState_Name(job->state()),
          ") has no step to re-plan: no step's document lengths have come from all its workers "
          "yet"));
    }
    demand = *it->second.demand;
  }
  // The demand's own generation: the job may have re-formed since, and the
  // plan must say which ranks its documents belong to.
  v1::Job planned_job = *job;
  planned_job.set_generation(demand.generation);
  auto plan = Plan(planned_job, demand);
  if (!plan.ok()) return plan.status();
  plan->set_pushed_weights_version(PushSpeedWeights(*job, /*forced=*/true));
  KeepPlan(job_id, *plan);
  return plan;
}

absl::StatusOr<std::vector<v1::AttentionPlan>> AttentionPlanning::Rebalance(
    const std::string& job_id) {
  std::vector<v1::AttentionPlan> plans;
  if (!job_id.empty()) {
    auto plan = Replan(job_id);
    if (!plan.ok()) return plan.status();
    plans.push_back(*std::move(plan));
    return plans;
  }
  std::vector<std::string> candidates;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, state] : states_) {
      if (state.demand) candidates.push_back(id);
    }
  }
  for (const std::string& id : candidates) {
    auto job = jobs_(id);
    if (!job.ok() || job->state() != v1::RUNNING) continue;
    auto plan = Replan(id);
    if (!plan.ok()) {
      LOG(WARNING) << "rebalance: job " << id << " not re-planned: " << plan.status();
      continue;
    }
    plans.push_back(*std::move(plan));
  }
  return plans;
}

}  // namespace corescape::scheduler
