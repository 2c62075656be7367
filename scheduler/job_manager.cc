#include "scheduler/job_manager.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <variant>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"
#include "runtime/job/job_spec.h"
#include "scheduler/data_plane_secret.h"
#include "scheduler/mask_epochs.h"

namespace corescape::scheduler {
namespace {

constexpr char kJobKind[] = "job";
constexpr char kJobTokenKind[] = "jobtoken";
constexpr char kJobKeyKind[] = "jobkey";
constexpr char kJobEventKind[] = "jobevent";

std::string EventKey(const std::string& job_id, uint64_t sequence) {
  return absl::StrFormat("%s/%012d", job_id, sequence);
}

// Workers by rank, then the attention servers (attention rank W + s).
void SetAssignedNodes(v1::Job& job, const std::vector<v1::NodeInfo>& workers,
                      const std::vector<v1::NodeInfo>& servers) {
  job.clear_assigned_nodes();
  job.clear_assigned_incarnations();
  for (const auto* group : {&workers, &servers}) {
    for (const v1::NodeInfo& node : *group) {
      job.add_assigned_nodes(node.name());
      job.add_assigned_incarnations(node.incarnation());
    }
  }
  job.set_assigned_attention_servers(static_cast<int32_t>(servers.size()));
}

}  // namespace

JobManager::JobManager(const Clock* clock, StateStore* store, EventLog* events,
                       NodeRegistry* registry, JobManagerOptions options)
    : clock_(clock), store_(store), events_(events), registry_(registry), options_(options) {}

bool JobManager::IsFinal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

absl::Status JobManager::Load() {
  auto jobs = store_->LoadAll(kJobKind);
  if (!jobs.ok()) return jobs.status();
  auto tokens = store_->LoadAll(kJobTokenKind);
  if (!tokens.ok()) return tokens.status();
  auto keys = store_->LoadAll(kJobKeyKind);
  if (!keys.ok()) return keys.status();
  auto events = store_->LoadAll(kJobEventKind);
  if (!events.ok()) return events.status();
  absl::MutexLock lock(&mu_);
  for (const auto& [id, value] : *jobs) {
    JobRecord record;
    if (!record.job.ParseFromString(value) || record.job.job_id() != id) {
      LOG(WARNING) << "skipping unreadable job record '" << id << "'";
      continue;
    }
    // Workers no longer fill defaults: a spec stored before a default was
    // added gets it here, as a submit would give it now.
    job::ApplyJobDefaults(*record.job.mutable_spec());
    record.recovering_since = clock_->Now();
    uint64_t number = 0;
    if (absl::SimpleAtoi(absl::StripPrefix(id, "job-"), &number)) {
      next_job_number_ = std::max(next_job_number_, number + 1);
    }
    jobs_[id] = std::move(record);
  }
  for (const auto& [id, token] : *tokens) {
    if (auto it = jobs_.find(id); it != jobs_.end()) it->second.token = token;
  }
  for (const auto& [key, id] : *keys) idempotency_keys_[key] = id;
  for (const auto& [key, value] : *events) {
    v1::JobEvent event;
    if (!event.ParseFromString(value)) continue;
    if (auto it = jobs_.find(event.job_id()); it != jobs_.end()) {
      it->second.events.push_back(std::move(event));
    }
  }
  LOG(INFO) << "restored " << jobs_.size() << " jobs";
  return absl::OkStatus();
}

absl::Status JobManager::Persist(const v1::Job& job) {
  absl::Status status = store_->Put(kJobKind, job.job_id(), job.SerializeAsString());
  if (!status.ok()) {
    LOG(WARNING) << "cannot persist job " << job.job_id() << ": " << status;
    return absl::UnavailableError(absl::StrCat("cannot record job durably: ", status.message()));
  }
  return absl::OkStatus();
}

void JobManager::StampEvent(const JobRecord& record, v1::JobEvent& event) const {
  event.set_sequence(record.events.empty() ? 1 : record.events.back().sequence() + 1);
  event.set_unix_ms(absl::ToUnixMillis(clock_->Now()));
  event.set_job_id(record.job.job_id());
}

void JobManager::AppendEvent(JobRecord& record, v1::JobEvent event) {
  StampEvent(record, event);
  if (absl::Status s = store_->Put(kJobEventKind, EventKey(event.job_id(), event.sequence()),
                                   event.SerializeAsString());
      !s.ok()) {
    LOG(WARNING) << "cannot persist job event: " << s;
  }
  record.events.push_back(std::move(event));
}

bool JobManager::Commit(JobRecord& record, v1::Job updated) {
  if (!Persist(updated).ok()) return false;
  record.job = std::move(updated);
  return true;
}

bool JobManager::Transition(JobRecord& record, v1::JobState state, const std::string& reason) {
  return Transition(record, record.job, state, reason);
}

bool JobManager::Transition(JobRecord& record, v1::Job updated, v1::JobState state,
                            const std::string& reason) {
  updated.set_state(state);
  updated.set_state_reason(reason);
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  if (state == v1::RUNNING && updated.started_unix_ms() == 0) updated.set_started_unix_ms(now_ms);
  if (IsFinal(state)) updated.set_finished_unix_ms(now_ms);
  if (!Commit(record, std::move(updated))) return false;
  v1::JobEvent event;
  event.set_state(state);
  event.set_message(reason);
  AppendEvent(record, std::move(event));
  events_->Append(v1::ClusterEvent::JOB_STATE_CHANGED, "", record.job.job_id(),
                  absl::StrCat(v1::JobState_Name(state), reason.empty() ? "" : ": ", reason));
  return true;
}

absl::StatusOr<v1::Job> JobManager::Submit(const v1::SubmitJobRequest& request,
                                           const std::string& submitted_by) {
  if (request.idempotency_key().size() > 256) {
    return absl::InvalidArgumentError("idempotency_key: longer than 256 bytes");
  }
  absl::StatusOr<job::ResolvedJobSpec> resolved = job::ResolveJobSpec(request.spec());
  if (!resolved.ok()) return resolved.status();
  const v1::JobSpec& spec = resolved->spec();
  // Paths no worker would take are refused now rather than failing five
  // recoveries at the workers.
  if (absl::Status s = CheckSomeWorkerHoldsDatasets(spec, registry_->List()); !s.ok()) return s;
  if (!spec.checkpoint().directory().empty()) {
    if (absl::Status s = CheckSomeWorkerHoldsCheckpoints(
            spec, job::ResolvedPath(spec.checkpoint().directory()), registry_->List());
        !s.ok()) {
      return s;
    }
  }

  absl::MutexLock lock(&mu_);
  if (!request.idempotency_key().empty()) {
    if (auto it = idempotency_keys_.find(request.idempotency_key());
        it != idempotency_keys_.end()) {
      if (JobRecord* existing = Find(it->second)) return existing->job;
    }
  }
  JobRecord record;
  v1::Job& job = record.job;
  job.set_job_id(absl::StrCat("job-", next_job_number_));
  *job.mutable_spec() = spec;
  job.set_state(v1::PENDING);
  job.set_state_reason("queued");
  job.set_submitted_unix_ms(absl::ToUnixMillis(clock_->Now()));
  job.set_submitted_by(submitted_by);
  job.set_gradient_accumulation(spec.data().gradient_accumulation());
  job.mutable_progress()->set_total_steps(spec.steps());
  job.mutable_progress()->set_checkpoint_step(-1);
  absl::StatusOr<std::string> secret = NewJobSecret();
  if (!secret.ok()) return secret.status();
  record.token = *std::move(secret);
  v1::JobEvent submitted;
  submitted.set_state(v1::PENDING);
  submitted.set_message("submitted");
  StampEvent(record, submitted);
  // One transaction: a job without its token or its key would be unusable
  // or submitted twice by a retry.
  std::vector<StoreWrite> writes = {
      {kJobTokenKind, job.job_id(), record.token},
      {kJobKind, job.job_id(), job.SerializeAsString()},
      {kJobEventKind, EventKey(job.job_id(), submitted.sequence()),
       submitted.SerializeAsString()}};
  if (!request.idempotency_key().empty()) {
    writes.push_back({kJobKeyKind, request.idempotency_key(), job.job_id()});
  }
  if (absl::Status s = store_->WriteBatch(writes); !s.ok()) {
    LOG(WARNING) << "cannot persist job " << job.job_id() << ": " << s;
    return absl::UnavailableError(absl::StrCat("cannot record job durably: ", s.message()));
  }
  ++next_job_number_;
  if (!request.idempotency_key().empty()) idempotency_keys_[request.idempotency_key()] = job.job_id();
  record.events.push_back(std::move(submitted));
  events_->Append(v1::ClusterEvent::JOB_STATE_CHANGED, "", job.job_id(),
                  absl::StrFormat("PENDING: '%s', %d workers, %d steps", spec.name(),
                                  spec.placement().workers(), spec.steps()));
  const std::string id = job.job_id();
  jobs_[id] = std::move(record);
  return jobs_[id].job;
}

JobManager::JobRecord* JobManager::Find(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  return it->second.job;
}

namespace {

constexpr char kJobListing[] = "jobs";

// List's order: newest first, the job id breaking ties.
bool ListedBefore(int64_t a_ms, const std::string& a_id, int64_t b_ms, const std::string& b_id) {
  return a_ms != b_ms ? a_ms > b_ms : a_id > b_id;
}

bool ListedBefore(const v1::Job& a, const v1::Job& b) {
  return ListedBefore(a.submitted_unix_ms(), a.job_id(), b.submitted_unix_ms(), b.job_id());
}

}  // namespace

std::vector<const v1::Job*> JobManager::Listed(const std::vector<v1::JobState>& states) const {
  std::vector<const v1::Job*> listed;
  for (const auto& [id, record] : jobs_) {
    if (!states.empty() &&
        std::find(states.begin(), states.end(), record.job.state()) == states.end()) {
      continue;
    }
    listed.push_back(&record.job);
  }
  std::sort(listed.begin(), listed.end(),
            [](const v1::Job* a, const v1::Job* b) { return ListedBefore(*a, *b); });
  return listed;
}

std::vector<v1::Job> JobManager::List(const std::vector<v1::JobState>& states, int limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> result;
  for (const v1::Job* job : Listed(states)) {
    if (limit > 0 && static_cast<int>(result.size()) >= limit) break;
    result.push_back(*job);
  }
  return result;
}

absl::StatusOr<Page<v1::Job>> JobManager::ListPage(const std::vector<v1::JobState>& states,
                                                   int page_size,
                                                   const std::string& page_token) const {
  auto position = DecodePageToken(kJobListing, page_token);
  if (!position.ok()) return position.status();
  // The position is "<submitted_unix_ms>/<job_id>" of the previous page's last job.
  int64_t cursor_ms = 0;
  std::string cursor_id;
  if (!position->empty()) {
    const size_t slash = position->find('/');
    if (slash == std::string::npos ||
        !absl::SimpleAtoi(position->substr(0, slash), &cursor_ms)) {
      return absl::InvalidArgumentError("page_token: malformed; start again without one");
    }
    cursor_id = position->substr(slash + 1);
  }
  absl::MutexLock lock(&mu_);
  Page<const v1::Job*> listed = TakePage<const v1::Job*>(
      Listed(states), page_size, kJobListing,
      [&](const v1::Job* job) {
        return position->empty() ||
               ListedBefore(cursor_ms, cursor_id, job->submitted_unix_ms(), job->job_id());
      },
      [](const v1::Job* job) { return absl::StrCat(job->submitted_unix_ms(), "/", job->job_id()); },
      [](const v1::Job* job) { return job->ByteSizeLong(); });
  Page<v1::Job> page;
  for (const v1::Job* job : listed.items) page.items.push_back(*job);
  page.next_page_token = std::move(listed.next_page_token);
  return page;
}

int JobManager::PruneFinished(absl::Duration retention) {
  absl::MutexLock lock(&mu_);
  const int64_t cutoff_ms = absl::ToUnixMillis(clock_->Now() - retention);
  std::map<std::string, std::vector<std::string>> keys_by_job;
  for (const auto& [key, id] : idempotency_keys_) keys_by_job[id].push_back(key);
  int pruned = 0;
  for (auto& [id, record] : jobs_) {
    if (!IsFinal(record.job.state()) || record.job.finished_unix_ms() >= cutoff_ms) continue;
    const std::vector<std::string>& keys = keys_by_job[id];
    if (record.events.empty() && keys.empty() && record.token.empty()) continue;
    std::vector<StoreWrite> writes;
    for (const v1::JobEvent& event : record.events) {
      writes.push_back({kJobEventKind, EventKey(id, event.sequence()), std::nullopt});
    }
    for (const std::string& key : keys) writes.push_back({kJobKeyKind, key, std::nullopt});
    writes.push_back({kJobTokenKind, id, std::nullopt});
    if (absl::Status s = store_->WriteBatch(writes); !s.ok()) {
      LOG(WARNING) << "cannot prune job " << id << " (retried later): " << s;
      continue;
    }
    record.events.clear();
    record.token.clear();
    for (const std::string& key : keys) idempotency_keys_.erase(key);
    ++pruned;
  }
  if (pruned > 0) LOG(INFO) << "pruned " << pruned << " jobs ended over " << retention << " ago";
  return pruned;
}

int JobManager::CountInState(v1::JobState state) const {
  absl::MutexLock lock(&mu_);
  int count = 0;
  for (const auto& [id, record] : jobs_) count += record.job.state() == state;
  return count;
}

int JobManager::CountPendingSubmittedBy(const std::string& submitted_by) const {
  absl::MutexLock lock(&mu_);
  int count = 0;
  for (const auto& [id, record] : jobs_) {
    count += record.job.state() == v1::PENDING && record.job.submitted_by() == submitted_by;
  }
  return count;
}

std::map<std::string, std::string> JobManager::RunningJobsByNode() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, std::string> jobs_by_node;
  for (const auto& [id, record] : jobs_) {
    if (record.job.state() != v1::RUNNING) continue;
    for (const std::string& node : record.job.assigned_nodes()) jobs_by_node[node] = id;
  }
  return jobs_by_node;
}

void JobManager::PushStopJob(const v1::Job& job, const std::string& node, uint64_t incarnation,
                             const std::string& reason) {
  v1::SchedulerCommand command;
  v1::StopJobCommand* stop = command.mutable_stop_job();
  stop->set_job_id(job.job_id());
  stop->set_generation(job.generation());
  stop->set_reason(reason);
  // Fails for nodes that are gone or re-registered: nothing to stop there.
  registry_->Push(node, incarnation, command).IgnoreError();
}

void JobManager::StopNodes(const JobRecord& record, const std::string& reason) {
  const v1::Job& job = record.job;
  for (int rank = 0; rank < job.assigned_nodes_size(); ++rank) {
    PushStopJob(job, job.assigned_nodes(rank), job.assigned_incarnations(rank), reason);
  }
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& job_id, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  JobRecord* record = Find(job_id);
  if (record == nullptr) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  if (IsFinal(record->job.state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " already ended (", v1::JobState_Name(record->job.state()), ")"));
  }
  const std::string why = reason.empty() ? "cancelled by user" : reason;
  if (!Transition(*record, v1::CANCELLED, why)) {
    return absl::UnavailableError("cannot record the cancellation durably; retry");
  }
  StopNodes(*record, why);
  return record->job;
}

absl::StatusOr<std::vector<v1::JobEvent>> JobManager::EventsAfter(const std::string& job_id,
                                                                  uint64_t after) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  std::vector<v1::JobEvent> result;
  for (const v1::JobEvent& event : it->second.events) {
    if (event.sequence() > after) result.push_back(event);
  }
  return result;
}

void JobManager::WaitForEvents(const std::string& job_id, uint64_t after,
                               absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto newer = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = jobs_.find(job_id);
    return it == jobs_.end() ||
           (!it->second.events.empty() && it->second.events.back().sequence() > after);
  };
  mu_.AwaitWithTimeout(absl::Condition(&newer), timeout);
}

bool JobManager::StartRecovery(JobRecord& record, const std::string& cause,
                               const Recovery& recovery) {
  v1::Job updated = record.job;
  if (recovery.state == v1::RECOVERING) updated.set_recoveries(updated.recoveries() + 1);
  // Durable first: a StopJob for a job still RUNNING on disk would leave a
  // restarted scheduler waiting on workers that have stopped.
  if (!Transition(record, std::move(updated), recovery.state, recovery.reason)) return false;
  record.recovering_since = clock_->Now();
  StopNodes(record, cause);
  return true;
}

void JobManager::Assign(JobRecord& record, const AssignJob& placement) {
  const std::vector<v1::NodeInfo>& nodes = placement.workers;
  const std::vector<v1::NodeInfo>& servers = placement.servers;
  v1::Job job = record.job;
  job.set_generation(job.generation() + 1);
  SetAssignedNodes(job, nodes, servers);
  job.set_gradient_accumulation(placement.gradient_accumulation);
  // Attention epochs count re-plans within a generation.
  job.set_attention_epoch(0);
  // SCAPE: every assignment starts a mask epoch (partition map for this
  // membership); it is persisted with the transition below.
  std::optional<v1::MaskEpochCommand> mask_epoch;
  if (job::UsesMaskEpochs(job.spec().optimizer().name())) {
    auto next = NextMaskEpoch(job, static_cast<int>(nodes.size()));
    if (!next.ok()) {
      LOG(ERROR) << "job " << job.job_id() << ": no mask epoch: " << next.status();
      Transition(record, v1::FAILED, absl::StrCat("cannot start a SCAPE mask epoch: ",
                                                  next.status().message()));
      return;
    }
    mask_epoch = *std::move(next);
    job.set_mask_epoch(mask_epoch->epoch());
    job.set_mask_epoch_world_size(mask_epoch->world_size());
  }
  const std::string reason =
      absl::StrFormat("generation %d on %s%s%s", job.generation(),
                      absl::StrJoin(job.assigned_nodes().begin(),
                                    job.assigned_nodes().begin() + nodes.size(), ", "),
                      servers.empty()
                          ? ""
                          : absl::StrCat(" with attention servers ",
                                         absl::StrJoin(job.assigned_nodes().begin() + nodes.size(),
                                                       job.assigned_nodes().end(), ", ")),
                      placement.gradient_accumulation != job.spec().data().gradient_accumulation()
                          ? absl::StrCat(" (elastic: gradient accumulation ",
                                         placement.gradient_accumulation, ")")
                          : "");
  if (!Transition(record, std::move(job), v1::RUNNING, reason)) return;
  record.reported_failed_nodes.clear();
  record.unrecorded_report.reset();
  record.awaiting_restore_of.reset();
  if (record.job.progress().checkpoint_step() >= 0) {
    record.awaiting_restore_of = record.job.progress().checkpoint_step();
  }
  // Workers: rank r of W (the data-parallel group). Attention servers: rank
  // W + s of W + S (the job's attention communicator: workers first).
  std::vector<v1::JobAssignment> assignments = ParticipantAssignments(
      record.job, record.token, nodes, servers, AttentionFailoverTimeout());
  if (mask_epoch) {
    for (size_t rank = 0; rank < nodes.size(); ++rank) {
      *assignments[rank].mutable_mask_epoch() = *mask_epoch;
    }
  }
  PushAssignments(assignments, nodes, servers);
}

void JobManager::PushAssignments(const std::vector<v1::JobAssignment>& assignments,
                                 const std::vector<v1::NodeInfo>& workers,
                                 const std::vector<v1::NodeInfo>& servers) {
  for (size_t rank = 0; rank < assignments.size(); ++rank) {
    const v1::NodeInfo& node =
        rank < workers.size() ? workers[rank] : servers[rank - workers.size()];
    v1::SchedulerCommand command;
    *command.mutable_assign() = assignments[rank];
    if (absl::Status s = registry_->Push(node.name(), node.incarnation(), command); !s.ok()) {
      LOG(WARNING) << "cannot deliver the assignment of job " << assignments[rank].job_id()
                   << " (attention epoch " << assignments[rank].attention_epoch() << ") to "
                   << node.name() << ": " << s;
    }
  }
}

void JobManager::StopAttentionServers(const JobRecord& record, const std::string& reason) {
  const v1::Job& job = record.job;
  const int servers = AssignedAttentionServers(job);
  for (int rank = job.assigned_nodes_size() - servers; rank < job.assigned_nodes_size();
       ++rank) {
    if (rank < 0) continue;
    PushStopJob(job, job.assigned_nodes(rank), job.assigned_incarnations(rank), reason);
  }
}

absl::Duration JobManager::AttentionFailoverTimeout() const {
  return 2 * registry_->options().lease_ttl;
}

PlacementSnapshot JobManager::Snapshot() const {
  PlacementSnapshot snapshot;
  snapshot.nodes = registry_->List();
  snapshot.now = clock_->Now();
  for (const auto& [id, record] : jobs_) {
    if (IsFinal(record.job.state())) continue;
    const bool waiting = record.job.state() == v1::PENDING || record.job.state() == v1::RECOVERING;
    const std::string& directory = record.job.spec().checkpoint().directory();
    snapshot.jobs.push_back({record.job, record.recovering_since, record.reported_failed_nodes,
                             record.reported_failure_at,
                             waiting && !directory.empty() ? job::ResolvedPath(directory) : ""});
  }
  return snapshot;
}

void JobManager::RetryUnrecordedReports() {
  for (auto& [id, record] : jobs_) {
    if (!record.unrecorded_report.has_value()) continue;
    if (record.job.state() != v1::RUNNING ||
        record.unrecorded_report->generation != record.job.generation()) {
      record.unrecorded_report.reset();  // overtaken by a recorded transition
      continue;
    }
    const UnrecordedReport report = *record.unrecorded_report;
    if (report.succeeded ? FinishSucceeded(record, report.reason)
                         : StartRecovery(record, report.reason,
                                         RecoveryOf(record.job, report.reason,
                                                    options_.max_recoveries))) {
      record.unrecorded_report.reset();
    }
  }
}

void JobManager::Reconcile() {
  absl::MutexLock lock(&mu_);
  // Before placement: a job that finished while the store refused writes
  // must not be recovered for workers that simply ended.
  RetryUnrecordedReports();
  const PlacementOptions options{options_.elastic_grace, options_.max_recoveries};
  for (const PlacementDecision& decision : PlaceJobs(Snapshot(), options)) {
    if (const auto* recover = std::get_if<RecoverJob>(&decision)) Apply(*recover);
    if (const auto* replan = std::get_if<ReplanAttention>(&decision)) Apply(*replan);
    if (const auto* assign = std::get_if<AssignJob>(&decision)) Apply(*assign);
    if (const auto* waiting = std::get_if<WaitingReason>(&decision)) Apply(*waiting);
  }
}

void JobManager::Apply(const RecoverJob& decision) {
  JobRecord* record = Find(decision.job_id);
  if (record == nullptr || record->job.state() != v1::RUNNING) return;
  StartRecovery(*record, decision.cause, decision.recovery);
}

void JobManager::Apply(const ReplanAttention& decision) {
  JobRecord* record = Find(decision.job_id);
  if (record == nullptr || record->job.state() != v1::RUNNING) return;
  v1::Job updated = record->job;
  updated.set_attention_epoch(updated.attention_epoch() + 1);
  SetAssignedNodes(updated, decision.workers, decision.servers);
  updated.set_state_reason(decision.reason);
  if (!Commit(*record, std::move(updated))) return;  // retried by the next Reconcile
  const v1::Job& job = record->job;
  v1::JobEvent event;
  event.set_attention_epoch(job.attention_epoch());
  event.set_message(decision.reason);
  AppendEvent(*record, std::move(event));
  events_->Append(v1::ClusterEvent::ATTENTION_REPLANNED, decision.event_node, job.job_id(),
                  decision.reason);
  // Drained servers are still there: they leave the job now.
  for (const LostAttentionServer& l : decision.leaving) {
    PushStopJob(job, l.name, l.incarnation, l.why);
  }
  LOG(INFO) << "job " << job.job_id() << ": " << decision.reason;
  // Workers keep training and rebuild only their attention communicator;
  // survivors and replacements serve the new epoch.
  PushAssignments(ParticipantAssignments(job, record->token, decision.workers, decision.servers,
                                         AttentionFailoverTimeout()),
                  decision.workers, decision.servers);
}

void JobManager::Apply(const AssignJob& decision) {
  JobRecord* record = Find(decision.job_id);
  if (record == nullptr ||
      (record->job.state() != v1::PENDING && record->job.state() != v1::RECOVERING)) {
    return;
  }
  Assign(*record, decision);
}

void JobManager::Apply(const WaitingReason& decision) {
  JobRecord* record = Find(decision.job_id);
  if (record == nullptr || record->job.state() != v1::PENDING) return;
  v1::Job updated = record->job;
  updated.set_state_reason(decision.reason);
  if (!Commit(*record, std::move(updated))) return;
  // In the job's events too: a watcher sees why it still waits (placement
  // decides a reason only when it changed).
  v1::JobEvent event;
  event.set_state(v1::PENDING);
  event.set_message(decision.reason);
  AppendEvent(*record, std::move(event));
}

namespace {

// Counters reported by processes: a huge (or hostile) report pins the total
// at the maximum instead of overflowing it, and a negative one adds nothing.
int64_t SaturatingAdd(int64_t total, int64_t more) {
  if (more <= 0) return total;
  return more > std::numeric_limits<int64_t>::max() - total
             ? std::numeric_limits<int64_t>::max()
             : total + more;
}

int64_t SaturatingMultiply(int64_t a, int64_t b) {
  if (a <= 0 || b <= 0) return 0;
  return a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max()
                                                      : a * b;
}

// Tokens of one step: the global batch, which an elastic shrink keeps (it
// raises accumulation as it drops workers).
int64_t GlobalBatchTokens(const v1::JobSpec& spec) {
  const v1::DataSpec& data = spec.data();
  return SaturatingMultiply(
      SaturatingMultiply(SaturatingMultiply(data.sequence_length(), data.micro_batch_size()),
                         data.gradient_accumulation()),
      spec.placement().workers());
}

// Whether (node, incarnation) is one of the job's current processes.
bool IsMember(const v1::Job& job, const std::string& node, uint64_t incarnation) {
  for (int i = 0; i < job.assigned_nodes_size() && i < job.assigned_incarnations_size(); ++i) {
    if (job.assigned_nodes(i) == node && job.assigned_incarnations(i) == incarnation) return true;
  }
  return false;
}

}  // namespace

void JobManager::OnStepReport(const std::string& node, uint64_t incarnation,
                              const v1::StepReport& report) {
  absl::MutexLock lock(&mu_);
  JobRecord* record = Find(report.job_id());
  if (record == nullptr) return;
  v1::Job& job = record->job;
  if (job.state() != v1::RUNNING || report.generation() != job.generation() ||
      report.rank() < 0 || report.rank() >= job.assigned_nodes_size() ||
      job.assigned_nodes(report.rank()) != node ||
      job.assigned_incarnations(report.rank()) != incarnation) {
    return;  // stale: an old generation or a fenced process
  }
  if (report.rank() != 0) return;  // ranks step in lock-step; rank 0 speaks for the job
  if (record->awaiting_restore_of && report.has_restored_checkpoint_step()) {
    RecordRestore(*record, report);
  }
  v1::JobProgress& progress = *job.mutable_progress();
  const bool new_checkpoint = report.checkpoint_step() > progress.checkpoint_step();
  progress.set_step(report.step());
  progress.set_loss(report.loss());
  if (!std::isnan(report.validation_loss())) progress.set_validation_loss(report.validation_loss());
  progress.set_tokens_per_second(report.tokens_per_second());
  // A rate a worker could not measure (or sent garbled) shows as unknown.
  auto rate = [](double value) { return std::isfinite(value) && value > 0 ? value : 0.0; };
  progress.set_model_tflops_per_second(rate(report.model_tflops_per_second()));
  progress.set_mfu(rate(report.mfu()));
  progress.set_bytes_sent(SaturatingAdd(progress.bytes_sent(), report.bytes_sent()));
  progress.set_bytes_received(SaturatingAdd(progress.bytes_received(), report.bytes_received()));
  if (new_checkpoint) progress.set_checkpoint_step(report.checkpoint_step());
  const absl::Time now = clock_->Now();
  CountStepTime(*record, report, now);
  const double elapsed_s = (absl::ToUnixMillis(now) - job.started_unix_ms()) / 1000.0;
  if (report.step() > 0 && elapsed_s > 0) {
    progress.set_eta_seconds(elapsed_s / report.step() * (job.spec().steps() - report.step()));
  }
  v1::JobEvent event;
  *event.mutable_progress() = progress;
  AppendEvent(*record, std::move(event));
  // The job record itself is rewritten when it matters for recovery (a new
  // checkpoint) and now and then for `corescape job`; events carry the rest.
  if (new_checkpoint || report.step() % 20 == 0) Persist(job).IgnoreError();
  if (report.step() >= job.spec().steps()) {
    const std::string reason =
        absl::StrFormat("finished %d steps, loss %.4f", report.step(), report.loss());
    if (!FinishSucceeded(*record, reason)) {
      // The workers are done and will not report again: Reconcile retries.
      record->unrecorded_report = UnrecordedReport{job.generation(), true, reason};
    }
  }
}

void JobManager::RecordRestore(JobRecord& record, const v1::StepReport& report) {
  const int64_t asked = *record.awaiting_restore_of;
  record.awaiting_restore_of.reset();
  const int64_t restored = report.restored_checkpoint_step();
  v1::Job& job = record.job;
  std::string message =
      restored >= 0 ? absl::StrCat("restored checkpoint step ", restored)
                    : std::string("restarted from the start: no checkpoint verified");
  if (restored < asked) {
    absl::StrAppend(&message, restored >= 0 ? ", not " : " (", "step ", asked,
                    restored >= 0 ? ": newer checkpoints failed verification" : ")");
    // The next recovery resumes from what exists, not from what failed.
    job.mutable_progress()->set_checkpoint_step(restored);
    Persist(job).IgnoreError();
  }
  v1::JobEvent event;
  event.set_message(message);
  AppendEvent(record, std::move(event));
  events_->Append(v1::ClusterEvent::JOB_CHECKPOINT_RESTORED, job.assigned_nodes(0),
                  job.job_id(), message);
}

void JobManager::CountStepTime(JobRecord& record, const v1::StepReport& report, absl::Time now) {
  v1::Job& job = record.job;
  // Steps past the job's end (or before its start) are no steps of it.
  if (report.step() <= 0 || report.step() > job.spec().steps()) return;
  int64_t steps = 1;
  double seconds = report.compute_seconds() + report.communication_seconds();
  if (record.last_report_generation == job.generation()) {
    if (report.step() <= record.last_report_step) return;  // a repeat, counted already
    // Since the previous report (reports lost meanwhile cover their steps):
    // validation and checkpoint writes count too.
    steps = report.step() - record.last_report_step;
    seconds = absl::ToDoubleSeconds(now - record.last_report_at);
  }
  record.last_report_at = now;
  record.last_report_generation = job.generation();
  record.last_report_step = report.step();
  // A step time a worker could not measure (or sent garbled) counts nothing.
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > kMaxStepSeconds) return;
  v1::JobProgress& progress = *job.mutable_progress();
  const int64_t tokens = SaturatingMultiply(steps, GlobalBatchTokens(job.spec()));
  progress.set_tokens_trained(SaturatingAdd(progress.tokens_trained(), tokens));
  progress.set_steps_seconds(progress.steps_seconds() + seconds);
  progress.set_steps_timed(SaturatingAdd(progress.steps_timed(), steps));
}

bool JobManager::FinishSucceeded(JobRecord& record, const std::string& reason) {
  if (!Transition(record, v1::SUCCEEDED, reason)) return false;
  // Workers end on their own; the servers are told (they also end when
  // every worker says goodbye on the data plane).
  StopAttentionServers(record, "job succeeded");
  return true;
}

void JobManager::OnJobFailure(const std::string& node, uint64_t incarnation,
                              const v1::JobFailureReport& report) {
  absl::MutexLock lock(&mu_);
  JobRecord* record = Find(report.job_id());
  if (record == nullptr || record->job.state() != v1::RUNNING ||
      report.generation() != record->job.generation() ||
      report.attention_epoch() < record->job.attention_epoch()) {
    return;  // stale: an old generation, or an attention epoch already re-planned
  }
  const v1::Job& job = record->job;
  if (!IsMember(job, node, incarnation)) {
    // Only the current generation's processes may fail it: anyone else
    // could otherwise spend its recovery budget.
    LOG_EVERY_N(WARNING, 100) << "ignored a failure report for " << job.job_id() << " from "
                              << node << " (incarnation " << incarnation
                              << "): not a member of generation " << job.generation();
    return;
  }
  record->reported_failed_nodes.assign(
      job.assigned_nodes().begin(),
      job.assigned_nodes().begin() + (job.assigned_nodes_size() - AssignedAttentionServers(job)));
  record->reported_failure_at = clock_->Now();
  const std::string cause = absl::StrCat("rank ", report.rank(), " (", node, ") failed: ",
                                         report.error().substr(0, 512));
  if (!StartRecovery(*record, cause, RecoveryOf(job, cause, options_.max_recoveries))) {
    // The reporter has given up on this generation: Reconcile retries.
    record->unrecorded_report = UnrecordedReport{job.generation(), false, cause};
  }
}

}  // namespace corescape::scheduler
