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
constexpr int kMaxDocumentsPerDemand = 1 << 20;  // over all its micro-batches
constexpr int kMaxMicroBatchesPerDemand = 4096;
constexpr int64_t kMaxDocumentLength = int64_t{1} << 32;  // as the servers check

int32_t AttentionServerCount(const v1::Job& job) {
  if (job.assigned_nodes_size() == 0) return 0;  // not placed
  return std::min(AssignedAttentionServers(job), job.assigned_nodes_size());
}

bool IsNewer(const v1::AttentionPlan& a, const v1::AttentionPlan& b) {
  // A new attention epoch redoes older steps: its plans are the newer.
  return std::make_tuple(a.generation(), a.attention_epoch(), a.step(), a.planned_unix_ms()) >
         std::make_tuple(b.generation(), b.attention_epoch(), b.step(), b.planned_unix_ms());
}

// The demand's fields against `job`; an error names the field.
absl::Status ValidateDemand(const v1::Job& job, const std::string& node, uint64_t incarnation,
                            const v1::AttentionDemand& demand) {
  if (demand.generation() != job.generation()) {
    return absl::FailedPreconditionError(
        absl::StrCat("attention_demand.generation: ", demand.generation(), ", but job ",
                     job.job_id(), " is at generation ", job.generation()));
  }
  if (demand.attention_epoch() < job.attention_epoch()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "attention_demand.attention_epoch: ", demand.attention_epoch(), " is stale: job ",
        job.job_id(), " is at attention epoch ", job.attention_epoch()));
  }
  if (demand.attention_epoch() > job.attention_epoch()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention_demand.attention_epoch: ", demand.attention_epoch(), ", but job ",
        job.job_id(), " is only at attention epoch ", job.attention_epoch()));
  }
  const int32_t workers = JobWorkerCount(job);
  if (demand.rank() < 0 || demand.rank() >= workers) {
    return absl::InvalidArgumentError(absl::StrCat("attention_demand.rank: ", demand.rank(),
                                                   " is not a worker rank of job ", job.job_id(),
                                                   " (it has ", workers, " workers)"));
  }
  if (job.assigned_nodes(demand.rank()) != node ||
      job.assigned_incarnations(demand.rank()) != incarnation) {
    return absl::PermissionDeniedError(absl::StrCat(
        "attention_demand.rank: rank ", demand.rank(), " of job ", job.job_id(), " is ",
        job.assigned_nodes(demand.rank()), " incarnation ",
        job.assigned_incarnations(demand.rank()), ", not ", node, " incarnation ", incarnation));
  }
  if (demand.step() < 1 || demand.step() > job.spec().steps()) {
    return absl::InvalidArgumentError(absl::StrCat("attention_demand.step: ", demand.step(),
                                                   " is not in [1, ", job.spec().steps(), "]"));
  }
  if (demand.micro_batches_size() < 1 ||
      demand.micro_batches_size() > kMaxMicroBatchesPerDemand) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_demand.micro_batches: ", demand.micro_batches_size(),
                     " micro-batches, not in [1, ", kMaxMicroBatchesPerDemand, "]"));
  }
  int64_t documents = 0;
  for (const v1::AttentionMicroBatch& micro_batch : demand.micro_batches()) {
    documents += micro_batch.document_lengths_size();
  }
  if (documents > kMaxDocumentsPerDemand) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_demand.micro_batches: ", documents,
                     " documents in all, more than ", kMaxDocumentsPerDemand));
  }
  for (int i = 0; i < demand.micro_batches_size(); ++i) {
    const v1::AttentionMicroBatch& micro_batch = demand.micro_batches(i);
    for (int d = 0; d < micro_batch.document_lengths_size(); ++d) {
      const int64_t length = micro_batch.document_lengths(d);
      if (length < 1 || length > kMaxDocumentLength) {
        return absl::InvalidArgumentError(
            absl::StrCat("attention_demand.micro_batches[", i, "].document_lengths[", d,
                         "]: ", length, " is not in [1, 2^32]"));
      }
    }
  }
  return absl::OkStatus();
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
  if (absl::Status s = ValidateDemand(*job, node, incarnation, demand); !s.ok()) return s;
  auto complete = Collect(*job, demand);
  if (!complete.ok()) return complete.status();
  if (!complete->has_value()) return absl::OkStatus();
  Demand& step = **complete;

  auto failed = [&](const absl::Status& status, const std::string& where) {
    return absl::Status(status.code(), absl::StrCat("planning step ", step.step, where,
                                                    " of job ", job->job_id(), ": ",
                                                    status.message()));
  };
  auto servers = PlanServers(*job);
  if (!servers.ok()) return failed(servers.status(), "");
  // The weights the workers have, not the newest estimates: the shipped
  // plan is then the one the participants would make themselves (with
  // every server ALIVE), so whether it arrives in time changes nothing.
  SpeedWeightPushes::Sent sent;
  {
    absl::MutexLock lock(&mu_);
    sent = pushes_.WorkersWeights(job->job_id(), job->generation(), job->attention_epoch(),
                                  AttentionServerCount(*job));
  }
  double weight_sum = 0;
  for (const PlannedServer& server : servers->planned) weight_sum += sent.weights[server.epoch_index];
  for (PlannedServer& server : servers->planned) {
    // Mean 1 over the servers planned (only ratios matter to the planner).
    server.speed_weight =
        sent.weights[server.epoch_index] * servers->planned.size() / weight_sum;
  }
  std::optional<v1::AttentionPlan> first;
  v1::AttentionStepPlan step_plan;
  step_plan.set_speed_weights_version(sent.version);
  step_plan.set_job_id(job->job_id());
  step_plan.set_generation(step.generation);
  step_plan.set_attention_epoch(step.attention_epoch);
  step_plan.set_step(step.step);
  for (size_t i = 0; i < step.micro_batches.size(); ++i) {
    const std::string where = absl::StrCat(" micro-batch ", i);
    auto plan = BuildAttentionPlan(*job, step.step, std::move(step.micro_batches[i]),
                                   servers->planned, servers->excluded, clock_->Now());
    if (!plan.ok()) return failed(plan.status(), where);
    auto tasks = EpochMicroBatch(*plan, servers->planned);
    if (!tasks.ok()) return failed(tasks.status(), where);
    *step_plan.add_micro_batches() = *std::move(tasks);
    if (i == 0) first = *std::move(plan);
  }
  first->set_step_micro_batches(step_plan.micro_batches_size());
  first->set_sent_to_workers(SendStepPlan(*job, servers->planned, std::move(step_plan)));
  KeepPlan(job->job_id(), *std::move(first));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<AttentionPlanning::Demand>> AttentionPlanning::Collect(
    const v1::Job& job, const v1::AttentionDemand& demand) {
  const int32_t workers = JobWorkerCount(job);
  absl::MutexLock lock(&mu_);
  JobState& state = states_[job.job_id()];
  state.touched = clock_->Now();
  if (state.generation != job.generation() || state.attention_epoch != job.attention_epoch()) {
    // The ranks of an older generation never finish its steps, and those of
    // an older epoch were planned over servers the job no longer has.
    state.generation = job.generation();
    state.attention_epoch = job.attention_epoch();
    state.pending.clear();
    state.step_plans_sent = 0;
  }
  // The newest planned step may come again: a step redone after an
  // attention failover is planned anew over the servers left. Older steps
  // come again only in a new epoch (the failover's), whose own newest
  // planned step bounds them.
  if (state.demand && state.demand->generation == job.generation() &&
      state.demand->attention_epoch == job.attention_epoch() &&
      demand.step() < state.demand->step) {
    return absl::FailedPreconditionError(
        absl::StrCat("attention_demand.step: ", demand.step(), " of job ", job.job_id(),
                     " arrived after the newer step ", state.demand->step,
                     " was planned in attention epoch ", job.attention_epoch()));
  }
  auto& ranks = state.pending[demand.step()];
  ranks.resize(workers);
  RankDemand& reported = ranks[demand.rank()].emplace();
  for (const v1::AttentionMicroBatch& micro_batch : demand.micro_batches()) {
    reported.emplace_back(micro_batch.document_lengths().begin(),
                          micro_batch.document_lengths().end());
  }
  const bool all_reported = std::all_of(ranks.begin(), ranks.end(),
                                        [](const auto& rank) { return rank.has_value(); });
  if (!all_reported) {
    // A worker that never reports must not make the others' steps pile up.
    while (static_cast<int>(state.pending.size()) > options_.max_pending_steps) {
      state.pending.erase(state.pending.begin());
    }
    EvictOldJobs();
    return std::nullopt;
  }
  size_t count = ranks[0]->size();
  for (const auto& rank : ranks) count = std::min(count, rank->size());
  const bool same_count = std::all_of(ranks.begin(), ranks.end(),
                                      [&](const auto& rank) { return rank->size() == count; });
  if (!same_count) {
    // Their loaders disagree; what they share can still be planned.
    LOG_EVERY_N(WARNING, 100) << "job " << job.job_id() << " step " << demand.step()
                              << ": the workers report different numbers of micro-batches; "
                                 "planning the first "
                              << count;
  }
  Demand complete;
  complete.generation = job.generation();
  complete.attention_epoch = job.attention_epoch();
  complete.step = demand.step();
  complete.micro_batches.resize(count);
  for (size_t i = 0; i < count; ++i) {
    for (auto& rank : ranks) complete.micro_batches[i].push_back(std::move((*rank)[i]));
  }
  // This step and every older one are settled.
  state.pending.erase(state.pending.begin(), state.pending.upper_bound(demand.step()));
  state.demand = Demand{complete.generation, complete.attention_epoch, complete.step,
                        {complete.micro_batches[0]}};
  EvictOldJobs();
  return complete;
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

absl::StatusOr<AttentionPlanning::Servers> AttentionPlanning::PlanServers(
    const v1::Job& job) {
  struct Candidate {
    PlannedServer server;
    uint64_t incarnation = 0;
  };
  std::vector<Candidate> live;
  Servers servers;
  const int32_t workers = JobWorkerCount(job);
  for (int rank = workers; rank < job.assigned_nodes_size(); ++rank) {
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
      servers.excluded.push_back(absl::StrCat(name, " (", why, ")"));
      continue;
    }
    Candidate candidate;
    candidate.server.name = name;
    candidate.server.address = node->data_address();
    candidate.server.epoch_index = rank - workers;
    candidate.incarnation = node->incarnation();
    live.push_back(std::move(candidate));
  }
  if (live.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.job_id(), " has no ALIVE attention server to plan over (",
                     absl::StrJoin(servers.excluded, ", "), ")"));
  }
  std::vector<std::optional<double>> speeds;
  {
    absl::MutexLock lock(&mu_);
    for (const Candidate& c : live) speeds.push_back(speeds_.Speed(c.server.name, c.incarnation));
  }
  const std::vector<double> weights = NormalisedSpeedWeights(speeds);
  for (size_t s = 0; s < live.size(); ++s) {
    PlannedServer server = live[s].server;
    server.speed_weight = weights[s];
    server.measured_speed = speeds[s].value_or(0.0);
    servers.planned.push_back(std::move(server));
  }
  return servers;
}

bool AttentionPlanning::SendStepPlan(const v1::Job& job, const std::vector<PlannedServer>& servers,
                                     v1::AttentionStepPlan step_plan) {
  if (push_ == nullptr || job.state() != v1::RUNNING) return false;
  // In order with the weight pushes on rank 0's session (push_mu_).
  absl::MutexLock push_lock(&push_mu_);
  int64_t sent_in_epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = states_.find(job.job_id());
    if (it != states_.end() && it->second.generation == job.generation() &&
        it->second.attention_epoch == job.attention_epoch()) {
      sent_in_epoch = ++it->second.step_plans_sent;
    }
  }
  const int64_t step = step_plan.step();
  const int micro_batches = step_plan.micro_batches_size();
  const uint64_t version = step_plan.speed_weights_version();
  v1::SchedulerCommand command;
  *command.mutable_attention_step_plan() = std::move(step_plan);
  if (absl::Status s = push_(job.assigned_nodes(0), job.assigned_incarnations(0), command);
      !s.ok()) {
    // Rank 0 is gone: the job recovers without it, and the participants
    // plan themselves meanwhile.
    LOG_EVERY_N(WARNING, 100) << "attention step plan " << step << " of job " << job.job_id()
                              << " not sent to " << job.assigned_nodes(0) << ": " << s;
    return false;
  }
  LOG_IF(INFO, sent_in_epoch == 1 || sent_in_epoch % 100 == 0)
      << "job " << job.job_id() << " generation " << job.generation() << " attention epoch "
      << job.attention_epoch() << ": sent worker 0 (" << job.assigned_nodes(0)
      << ") the plan of step " << step << " (" << micro_batches << " micro-batches over "
      << servers.size() << " of " << AttentionServerCount(job)
      << " servers, speed weights version " << version << "); step plan " << sent_in_epoch
      << " of the epoch (the first and every 100th are logged)";
  return true;
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
  auto servers = PlanServers(planned_job);
  if (!servers.ok()) return servers.status();
  auto plan = BuildAttentionPlan(planned_job, demand.step, demand.micro_batches[0],
                                 servers->planned, servers->excluded, clock_->Now());
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
