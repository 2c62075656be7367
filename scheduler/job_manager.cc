#include "scheduler/job_manager.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"
#include "scheduler/job_validation.h"
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

bool IsActive(v1::JobState state) {
  return state == v1::RUNNING || state == v1::RECOVERING;
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

absl::Status JobManager::Persist(const JobRecord& record) {
  absl::Status status =
      store_->Put(kJobKind, record.job.job_id(), record.job.SerializeAsString());
  if (!status.ok()) {
    LOG(WARNING) << "cannot persist job " << record.job.job_id() << ": " << status;
    return absl::UnavailableError(absl::StrCat("cannot record job durably: ", status.message()));
  }
  return absl::OkStatus();
}

void JobManager::AppendEvent(JobRecord& record, v1::JobEvent event) {
  event.set_sequence(record.events.empty() ? 1 : record.events.back().sequence() + 1);
  event.set_unix_ms(absl::ToUnixMillis(clock_->Now()));
  event.set_job_id(record.job.job_id());
  if (absl::Status s = store_->Put(kJobEventKind, EventKey(event.job_id(), event.sequence()),
                                   event.SerializeAsString());
      !s.ok()) {
    LOG(WARNING) << "cannot persist job event: " << s;
  }
  record.events.push_back(std::move(event));
}

bool JobManager::Transition(JobRecord& record, v1::JobState state, const std::string& reason) {
  v1::Job updated = record.job;
  updated.set_state(state);
  updated.set_state_reason(reason);
  const int64_t now_ms = absl::ToUnixMillis(clock_->Now());
  if (state == v1::RUNNING && updated.started_unix_ms() == 0) updated.set_started_unix_ms(now_ms);
  if (IsFinal(state)) updated.set_finished_unix_ms(now_ms);
  std::swap(record.job, updated);
  if (!Persist(record).ok()) {
    std::swap(record.job, updated);
    return false;
  }
  v1::JobEvent event;
  event.set_state(state);
  event.set_message(reason);
  AppendEvent(record, std::move(event));
  events_->Append(v1::ClusterEvent::JOB_STATE_CHANGED, "", record.job.job_id(),
                  absl::StrCat(v1::JobState_Name(state), reason.empty() ? "" : ": ", reason));
  return true;
}

absl::StatusOr<v1::Job> JobManager::Submit(const v1::SubmitJobRequest& request) {
  if (request.idempotency_key().size() > 256) {
    return absl::InvalidArgumentError("idempotency_key: longer than 256 bytes");
  }
  v1::JobSpec spec = request.spec();
  ApplyJobDefaults(spec);
  if (absl::Status s = ValidateJobSpec(spec); !s.ok()) return s;

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
  job.set_gradient_accumulation(spec.data().gradient_accumulation());
  job.mutable_progress()->set_total_steps(spec.steps());
  job.mutable_progress()->set_checkpoint_step(-1);
  absl::BitGen gen;
  record.token = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen),
                                 absl::Uniform<uint64_t>(gen));
  // Token and key first: a job record without its token would be unusable.
  if (absl::Status s = store_->Put(kJobTokenKind, job.job_id(), record.token); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot record job durably: ", s.message()));
  }
  if (!request.idempotency_key().empty()) {
    if (absl::Status s = store_->Put(kJobKeyKind, request.idempotency_key(), job.job_id());
        !s.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot record job durably: ", s.message()));
    }
  }
  if (absl::Status s = Persist(record); !s.ok()) return s;
  ++next_job_number_;
  if (!request.idempotency_key().empty()) idempotency_keys_[request.idempotency_key()] = job.job_id();
  v1::JobEvent event;
  event.set_state(v1::PENDING);
  event.set_message("submitted");
  AppendEvent(record, std::move(event));
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

std::vector<v1::Job> JobManager::List(const std::vector<v1::JobState>& states, int limit) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> result;
  for (const auto& [id, record] : jobs_) {
    if (!states.empty() &&
        std::find(states.begin(), states.end(), record.job.state()) == states.end()) {
      continue;
    }
    result.push_back(record.job);
  }
  std::sort(result.begin(), result.end(), [](const v1::Job& a, const v1::Job& b) {
    return a.submitted_unix_ms() != b.submitted_unix_ms()
               ? a.submitted_unix_ms() > b.submitted_unix_ms()
               : a.job_id() > b.job_id();
  });
  if (limit > 0 && static_cast<int>(result.size()) > limit) result.resize(limit);
  return result;
}

int JobManager::CountInState(v1::JobState state) const {
  absl::MutexLock lock(&mu_);
  int count = 0;
  for (const auto& [id, record] : jobs_) count += record.job.state() == state;
  return count;
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

void JobManager::StartRecovery(JobRecord& record, const std::string& reason) {
  v1::Job& job = record.job;
  StopNodes(record, reason);
  if (job.recoveries() >= options_.max_recoveries) {
    Transition(record, v1::FAILED,
               absl::StrCat(reason, "; gave up after ", job.recoveries(), " recoveries"));
    return;
  }
  job.set_recoveries(job.recoveries() + 1);
  record.recovering_since = clock_->Now();
  Transition(record, v1::RECOVERING,
             absl::StrCat(reason, "; restarting from ",
                          job.progress().checkpoint_step() >= 0
                              ? absl::StrCat("checkpoint step ", job.progress().checkpoint_step())
                              : std::string("the start (no checkpoint yet)")));
}

int JobManager::AttentionServersWanted(const v1::JobSpec& spec) {
  return spec.attention().mode() == v1::DISAGGREGATED ? spec.attention().attention_servers() : 0;
}

void JobManager::Assign(JobRecord& record, const std::vector<v1::NodeInfo>& nodes,
                        const std::vector<v1::NodeInfo>& servers,
                        int32_t gradient_accumulation) {
  v1::Job& job = record.job;
  v1::Job before = job;
  record.reported_failed_nodes.clear();
  job.set_generation(job.generation() + 1);
  job.clear_assigned_nodes();
  job.clear_assigned_incarnations();
  // Workers by rank, then the attention servers (attention rank W + s).
  for (const auto* group : {&nodes, &servers}) {
    for (const v1::NodeInfo& node : *group) {
      job.add_assigned_nodes(node.name());
      job.add_assigned_incarnations(node.incarnation());
    }
  }
  job.set_gradient_accumulation(gradient_accumulation);
  // Attention epochs count re-plans within a generation.
  job.set_attention_epoch(0);
  job.set_assigned_attention_servers(static_cast<int32_t>(servers.size()));
  // SCAPE: every assignment starts a mask epoch (partition map for this
  // membership); it is persisted with the transition below.
  std::optional<v1::MaskEpochCommand> mask_epoch;
  if (UsesMaskEpochs(job.spec().optimizer().name())) {
    auto next = NextMaskEpoch(job, static_cast<int>(nodes.size()));
    if (!next.ok()) {
      LOG(ERROR) << "job " << job.job_id() << ": no mask epoch: " << next.status();
      job = before;
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
                      gradient_accumulation != job.spec().data().gradient_accumulation()
                          ? absl::StrCat(" (elastic: gradient accumulation ",
                                         gradient_accumulation, ")")
                          : "");
  if (!Transition(record, v1::RUNNING, reason)) {
    job = before;
    return;
  }
  // Workers: rank r of W (the data-parallel group). Attention servers: rank
  // W + s of W + S (the job's attention communicator: workers first).
  std::vector<v1::JobAssignment> assignments = AttentionMembershipAssignments(
      job, record.token, nodes, servers, AttentionFailoverTimeout());
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

void JobManager::ReplanAttention(JobRecord& record, const std::vector<LostAttentionServer>& lost,
                                 const std::map<std::string, v1::NodeInfo>& nodes,
                                 std::vector<v1::NodeInfo>& spare_servers) {
  v1::Job& job = record.job;
  const int servers_before = AssignedAttentionServers(job);
  const int workers = job.assigned_nodes_size() - servers_before;
  std::vector<std::string> reasons;
  for (const LostAttentionServer& l : lost) reasons.push_back(l.why);
  // The workers were checked alive with their incarnations; the survivors
  // keep their order and replacements follow them.
  std::vector<v1::NodeInfo> worker_nodes, server_nodes;
  for (int rank = 0; rank < workers; ++rank) {
    worker_nodes.push_back(nodes.at(job.assigned_nodes(rank)));
  }
  for (int index = 0; index < servers_before; ++index) {
    const bool gone = std::any_of(lost.begin(), lost.end(),
                                  [&](const LostAttentionServer& l) { return l.index == index; });
    if (!gone) server_nodes.push_back(nodes.at(job.assigned_nodes(workers + index)));
  }
  // Refill to what the spec asked for (a job that lost a server earlier with
  // no spare grows back when one appears).
  const size_t wanted = static_cast<size_t>(
      std::max(servers_before, job.spec().attention().attention_servers()));
  const size_t replacements =
      std::min(wanted - std::min(wanted, server_nodes.size()), spare_servers.size());
  std::vector<std::string> joined;
  for (size_t i = 0; i < replacements; ++i) joined.push_back(spare_servers[i].name());
  server_nodes.insert(server_nodes.end(), spare_servers.begin(),
                      spare_servers.begin() + replacements);
  if (lost.empty() && joined.empty()) return;
  if (!joined.empty()) {
    reasons.push_back(absl::StrCat("attention server", joined.size() == 1 ? " " : "s ",
                                   absl::StrJoin(joined, ", "), " joined"));
  }
  const std::string what = absl::StrJoin(reasons, "; ");
  const bool only_drained = std::all_of(lost.begin(), lost.end(), [](const LostAttentionServer& l) {
    return l.reachable;
  });
  if (server_nodes.empty() && only_drained) {
    // A drained server keeps serving until a replacement exists: draining
    // must not cost a restart.
    LOG_EVERY_N(INFO, 50) << "job " << job.job_id() << ": " << what
                          << "; no replacement yet, it keeps serving";
    return;
  }
  if (server_nodes.empty()) {
    // Nothing to re-plan over: restart from the checkpoint once servers are
    // back (RECOVERING waits for them), as before attention epochs.
    StartRecovery(record, absl::StrCat(what, "; no attention server left"));
    return;
  }
  const v1::Job before = job;
  job.set_attention_epoch(job.attention_epoch() + 1);
  job.clear_assigned_nodes();
  job.clear_assigned_incarnations();
  for (const auto* group : {&worker_nodes, &server_nodes}) {
    for (const v1::NodeInfo& node : *group) {
      job.add_assigned_nodes(node.name());
      job.add_assigned_incarnations(node.incarnation());
    }
  }
  job.set_assigned_attention_servers(static_cast<int32_t>(server_nodes.size()));
  std::vector<std::string> server_names;
  for (const v1::NodeInfo& server : server_nodes) server_names.push_back(server.name());
  const std::string message = absl::StrFormat(
      "%s; re-planned over %d attention server%s (%s) in attention epoch %d, generation %d "
      "continues",
      what, server_nodes.size(), server_nodes.size() == 1 ? "" : "s",
      absl::StrJoin(server_names, ", "), job.attention_epoch(), job.generation());
  job.set_state_reason(message);
  if (!Persist(record).ok()) {
    job = before;  // retried by the next Reconcile
    return;
  }
  spare_servers.erase(spare_servers.begin(), spare_servers.begin() + replacements);
  v1::JobEvent event;
  event.set_attention_epoch(job.attention_epoch());
  event.set_message(message);
  AppendEvent(record, std::move(event));
  events_->Append(v1::ClusterEvent::ATTENTION_REPLANNED,
                  lost.empty() ? joined.front() : lost.front().name, job.job_id(), message);
  // Drained servers are still there: they leave the job now.
  for (const LostAttentionServer& l : lost) {
    if (l.reachable) PushStopJob(job, l.name, l.incarnation, l.why);
  }
  LOG(INFO) << "job " << job.job_id() << ": " << message;
  // Workers keep training and rebuild only their attention communicator;
  // survivors and replacements serve the new epoch.
  PushAssignments(AttentionMembershipAssignments(job, record.token, worker_nodes, server_nodes,
                                                 AttentionFailoverTimeout()),
                  worker_nodes, server_nodes);
}

void JobManager::Reconcile() {
  absl::MutexLock lock(&mu_);
  // Observed membership.
  std::map<std::string, v1::NodeInfo> nodes;
  for (v1::NodeInfo& node : registry_->List()) nodes[node.name()] = std::move(node);

  // 1. Running jobs whose workers died or restarted recover; jobs that only
  //    lost attention servers are re-planned below, without a restart.
  std::set<std::string> busy;
  std::vector<std::pair<JobRecord*, std::vector<LostAttentionServer>>> replans;
  for (auto& [id, record] : jobs_) {
    v1::Job& job = record.job;
    if (job.state() != v1::RUNNING) continue;
    std::string failure;
    const int workers = job.assigned_nodes_size() - AssignedAttentionServers(job);
    for (int rank = 0; rank < workers && failure.empty(); ++rank) {
      const std::string who = absl::StrCat("rank ", rank, " (", job.assigned_nodes(rank), ")");
      auto it = nodes.find(job.assigned_nodes(rank));
      if (it == nodes.end()) {
        failure = absl::StrCat(who, " vanished");
      } else if (it->second.state() == v1::DEAD || it->second.state() == v1::DEREGISTERED) {
        failure = absl::StrCat(who, " is ", v1::NodeState_Name(it->second.state()));
      } else if (it->second.incarnation() != job.assigned_incarnations(rank)) {
        failure = absl::StrCat(who, " restarted (incarnation ", it->second.incarnation(), ")");
      }
    }
    if (!failure.empty()) {
      StartRecovery(record, failure);
      continue;
    }
    std::vector<LostAttentionServer> lost = FindLostAttentionServers(job, nodes);
    for (int rank = 0; rank < job.assigned_nodes_size(); ++rank) {
      const bool gone = std::any_of(lost.begin(), lost.end(), [&](const LostAttentionServer& l) {
        return workers + l.index == rank;
      });
      if (!gone) busy.insert(job.assigned_nodes(rank));
    }
    const bool short_of_servers =
        job.spec().attention().mode() == v1::DISAGGREGATED &&
        AssignedAttentionServers(job) < job.spec().attention().attention_servers();
    if (!lost.empty() || short_of_servers) replans.emplace_back(&record, std::move(lost));
  }
  // Free healthy servers replace lost ones (a restarted server can rejoin
  // as its own replacement).
  std::vector<v1::NodeInfo> spare_servers;
  for (const auto& [name, node] : nodes) {
    if (node.state() == v1::ALIVE && node.role() == v1::ATTENTION_SERVER && !busy.count(name)) {
      spare_servers.push_back(node);
    }
  }
  for (auto& [record, lost] : replans) {
    ReplanAttention(*record, lost, nodes, spare_servers);
    const bool running = record->job.state() == v1::RUNNING;
    for (const std::string& name : record->job.assigned_nodes()) {
      if (running) {
        busy.insert(name);
      } else {
        busy.erase(name);  // recovering: its nodes are free again, as above
      }
    }
  }

  // 2. Place waiting jobs, oldest first, on free healthy workers (gang).
  std::vector<v1::NodeInfo> free, free_servers;
  for (const auto& [name, node] : nodes) {
    if (node.state() != v1::ALIVE || busy.count(name)) continue;
    if (node.role() == v1::WORKER) free.push_back(node);
    if (node.role() == v1::ATTENTION_SERVER) free_servers.push_back(node);
  }
  std::vector<JobRecord*> waiting;
  for (auto& [id, record] : jobs_) {
    if (record.job.state() == v1::PENDING || record.job.state() == v1::RECOVERING) {
      waiting.push_back(&record);
    }
  }
  std::sort(waiting.begin(), waiting.end(), [](const JobRecord* a, const JobRecord* b) {
    return a->job.submitted_unix_ms() < b->job.submitted_unix_ms();
  });
  const absl::Time now = clock_->Now();
  for (JobRecord* record : waiting) {
    const v1::JobSpec& spec = record->job.spec();
    const int wanted = spec.placement().workers();
    // Disaggregated jobs also need their attention servers, all at once.
    const int servers_wanted = AttentionServersWanted(spec);
    if (static_cast<int>(free_servers.size()) < servers_wanted) {
      const std::string reason =
          absl::StrFormat("waiting for %d healthy free attention servers (%d free now)",
                          servers_wanted, free_servers.size());
      if (record->job.state() == v1::PENDING && record->job.state_reason() != reason) {
        v1::Job updated = record->job;
        record->job.set_state_reason(reason);
        if (!Persist(*record).ok()) record->job = updated;
      }
      continue;
    }
    // Not the failed generation's workers that stayed silent since its
    // failure report: one of them may be the dead peer it is about.
    const std::vector<v1::NodeInfo> placeable = PlaceableWorkers(*record, free);
    std::vector<v1::NodeInfo> chosen;
    if (!spec.placement().node_names().empty()) {
      for (const std::string& name : spec.placement().node_names()) {
        auto it = std::find_if(placeable.begin(), placeable.end(),
                               [&](const v1::NodeInfo& n) { return n.name() == name; });
        if (it != placeable.end()) chosen.push_back(*it);
      }
      if (static_cast<int>(chosen.size()) < wanted) chosen.clear();
    } else if (static_cast<int>(placeable.size()) >= wanted) {
      chosen.assign(placeable.begin(), placeable.begin() + wanted);
    }
    int32_t accumulation = spec.data().gradient_accumulation();
    if (chosen.empty() && record->job.state() == v1::RECOVERING &&
        spec.placement().min_workers() < wanted && spec.placement().node_names().empty() &&
        now - record->recovering_since >= options_.elastic_grace) {
      // Elastic: fewer workers, more accumulation, same global batch.
      const int64_t global_micro_batches = int64_t{wanted} * accumulation;
      for (int world = std::min<int>(wanted - 1, placeable.size());
           world >= spec.placement().min_workers(); --world) {
        if (global_micro_batches % world == 0) {
          chosen.assign(placeable.begin(), placeable.begin() + world);
          accumulation = static_cast<int32_t>(global_micro_batches / world);
          break;
        }
      }
    }
    if (chosen.empty()) {
      std::string reason =
          absl::StrFormat("waiting for %d healthy free workers (%d free now)", wanted, free.size());
      if (placeable.size() < free.size()) {
        absl::StrAppend(&reason, "; ", free.size() - placeable.size(),
                        " of the failed generation's workers silent since its failure report");
      }
      if (record->job.state() == v1::PENDING && record->job.state_reason() != reason) {
        v1::Job updated = record->job;
        record->job.set_state_reason(reason);
        if (!Persist(*record).ok()) record->job = updated;
      }
      continue;
    }
    std::vector<v1::NodeInfo> servers(free_servers.begin(),
                                      free_servers.begin() + servers_wanted);
    Assign(*record, chosen, servers, accumulation);
    if (record->job.state() != v1::RUNNING) continue;  // not recorded; retried next time
    free_servers.erase(free_servers.begin(), free_servers.begin() + servers_wanted);
    for (const v1::NodeInfo& node : chosen) {
      free.erase(std::remove_if(free.begin(), free.end(),
                                [&](const v1::NodeInfo& n) { return n.name() == node.name(); }),
                 free.end());
    }
  }
}

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
  v1::JobProgress& progress = *job.mutable_progress();
  const bool new_checkpoint = report.checkpoint_step() > progress.checkpoint_step();
  progress.set_step(report.step());
  progress.set_loss(report.loss());
  if (!std::isnan(report.validation_loss())) progress.set_validation_loss(report.validation_loss());
  progress.set_tokens_per_second(report.tokens_per_second());
  progress.set_bytes_sent(progress.bytes_sent() + report.bytes_sent());
  progress.set_bytes_received(progress.bytes_received() + report.bytes_received());
  if (new_checkpoint) progress.set_checkpoint_step(report.checkpoint_step());
  const double elapsed_s =
      (absl::ToUnixMillis(clock_->Now()) - job.started_unix_ms()) / 1000.0;
  if (report.step() > 0 && elapsed_s > 0) {
    progress.set_eta_seconds(elapsed_s / report.step() * (job.spec().steps() - report.step()));
  }
  v1::JobEvent event;
  *event.mutable_progress() = progress;
  AppendEvent(*record, std::move(event));
  // The job record itself is rewritten when it matters for recovery (a new
  // checkpoint) and now and then for `corescape job`; events carry the rest.
  if (new_checkpoint || report.step() % 20 == 0) Persist(*record).IgnoreError();
  if (report.step() >= job.spec().steps()) {
    Transition(*record, v1::SUCCEEDED,
               absl::StrFormat("finished %d steps, loss %.4f", report.step(), report.loss()));
    // Workers end on their own; the servers are told (they also end when
    // every worker says goodbye on the data plane).
    StopAttentionServers(*record, "job succeeded");
  }
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
  record->reported_failed_nodes.assign(
      job.assigned_nodes().begin(),
      job.assigned_nodes().begin() + (job.assigned_nodes_size() - AssignedAttentionServers(job)));
  record->reported_failure_at = clock_->Now();
  StartRecovery(*record, absl::StrCat("rank ", report.rank(), " (", node, ") failed: ",
                                      report.error().substr(0, 512)));
}

std::vector<v1::NodeInfo> JobManager::PlaceableWorkers(
    const JobRecord& record, const std::vector<v1::NodeInfo>& free) const {
  if (record.reported_failed_nodes.empty()) return free;
  const int64_t reported_ms = absl::ToUnixMillis(record.reported_failure_at);
  std::vector<v1::NodeInfo> placeable;
  for (const v1::NodeInfo& node : free) {
    const bool suspect = std::find(record.reported_failed_nodes.begin(),
                                   record.reported_failed_nodes.end(),
                                   node.name()) != record.reported_failed_nodes.end() &&
                         node.last_heartbeat_unix_ms() < reported_ms;
    if (!suspect) placeable.push_back(node);
  }
  return placeable;
}

}  // namespace corescape::scheduler
