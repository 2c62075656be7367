#include "scheduler/placement.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/job/job_device.h"
#include "runtime/job/job_spec.h"

namespace corescape::scheduler {
namespace {

using NodesByName = std::map<std::string, v1::NodeInfo>;

// A job as the decisions so far leave it.
struct JobInPass {
  const PlacementJob* in = nullptr;
  v1::JobState state = v1::PENDING;
  absl::Time recovering_since;
  // The nodes it holds while it runs.
  std::vector<std::string> held;
  // Step 2's input: a running DISAGGREGATED job to re-plan.
  bool replan = false;
  std::vector<LostAttentionServer> lost_servers;
};

int WorkerCount(const v1::Job& job) {
  return job.assigned_nodes_size() - AssignedAttentionServers(job);
}

// Step 1 for one RUNNING job: what broke its data-parallel group, if anything.
std::optional<std::string> LostWorker(const v1::Job& job, const NodesByName& nodes) {
  for (int rank = 0; rank < WorkerCount(job); ++rank) {
    const std::string who = absl::StrCat("rank ", rank, " (", job.assigned_nodes(rank), ")");
    auto it = nodes.find(job.assigned_nodes(rank));
    if (it == nodes.end()) return absl::StrCat(who, " vanished");
    if (it->second.state() == v1::DEAD || it->second.state() == v1::DEREGISTERED) {
      return absl::StrCat(who, " is ", v1::NodeState_Name(it->second.state()));
    }
    if (it->second.incarnation() != job.assigned_incarnations(rank)) {
      return absl::StrCat(who, " restarted (incarnation ", it->second.incarnation(), ")");
    }
  }
  return std::nullopt;
}

RecoverJob Recover(const v1::Job& job, std::string cause, int max_recoveries) {
  Recovery recovery = RecoveryOf(job, cause, max_recoveries);
  return RecoverJob{job.job_id(), std::move(cause), std::move(recovery)};
}

// Step 2 for one job: a new attention epoch, a recovery, or nothing (no
// change, or only drained servers lost with nothing to replace them).
// Takes the replacements it uses from the front of `spare_servers`.
std::optional<PlacementDecision> ReplanAttentionOf(const v1::Job& job,
                                                   const std::vector<LostAttentionServer>& lost,
                                                   const NodesByName& nodes,
                                                   std::vector<v1::NodeInfo>& spare_servers,
                                                   int max_recoveries) {
  const int servers_before = AssignedAttentionServers(job);
  const int workers = job.assigned_nodes_size() - servers_before;
  ReplanAttention replan;
  replan.job_id = job.job_id();
  // Step 1 found the workers alive with their incarnations.
  for (int rank = 0; rank < workers; ++rank) {
    replan.workers.push_back(nodes.at(job.assigned_nodes(rank)));
  }
  for (int index = 0; index < servers_before; ++index) {
    const bool gone = std::any_of(lost.begin(), lost.end(),
                                  [&](const LostAttentionServer& l) { return l.index == index; });
    if (!gone) replan.servers.push_back(nodes.at(job.assigned_nodes(workers + index)));
  }
  const size_t wanted = static_cast<size_t>(
      std::max(servers_before, job.spec().attention().attention_servers()));
  const size_t replacements =
      std::min(wanted - std::min(wanted, replan.servers.size()), spare_servers.size());
  if (lost.empty() && replacements == 0) return std::nullopt;
  std::vector<std::string> reasons, joined;
  for (const LostAttentionServer& l : lost) reasons.push_back(l.why);
  for (size_t i = 0; i < replacements; ++i) joined.push_back(spare_servers[i].name());
  if (!joined.empty()) {
    reasons.push_back(absl::StrCat("attention server", joined.size() == 1 ? " " : "s ",
                                   absl::StrJoin(joined, ", "), " joined"));
  }
  const std::string what = absl::StrJoin(reasons, "; ");
  if (replacements == 0 && replan.servers.empty()) {
    const bool only_drained = std::all_of(
        lost.begin(), lost.end(), [](const LostAttentionServer& l) { return l.reachable; });
    if (only_drained) return std::nullopt;  // it keeps serving
    // Nothing to re-plan over: restart from the checkpoint once servers are
    // back (RECOVERING waits for them).
    return Recover(job, absl::StrCat(what, "; no attention server left"), max_recoveries);
  }
  replan.servers.insert(replan.servers.end(), spare_servers.begin(),
                        spare_servers.begin() + replacements);
  spare_servers.erase(spare_servers.begin(), spare_servers.begin() + replacements);
  for (const LostAttentionServer& l : lost) {
    if (l.reachable) replan.leaving.push_back(l);
  }
  replan.event_node = lost.empty() ? joined.front() : lost.front().name;
  std::vector<std::string> server_names;
  for (const v1::NodeInfo& server : replan.servers) server_names.push_back(server.name());
  replan.reason = absl::StrFormat(
      "%s; re-planned over %d attention server%s (%s) in attention epoch %d, generation %d "
      "continues",
      what, replan.servers.size(), replan.servers.size() == 1 ? "" : "s",
      absl::StrJoin(server_names, ", "), job.attention_epoch() + 1, job.generation());
  return replan;
}

int AttentionServersWanted(const v1::JobSpec& spec) {
  return spec.attention().mode() == v1::DISAGGREGATED ? spec.attention().attention_servers() : 0;
}

// `free` minus the failed generation's workers silent since its failure
// report.
std::vector<v1::NodeInfo> PlaceableWorkers(const PlacementJob& job,
                                           const std::vector<v1::NodeInfo>& free) {
  if (job.reported_failed_nodes.empty()) return free;
  const int64_t reported_ms = absl::ToUnixMillis(job.reported_failure_at);
  std::vector<v1::NodeInfo> placeable;
  for (const v1::NodeInfo& node : free) {
    const bool suspect =
        std::find(job.reported_failed_nodes.begin(), job.reported_failed_nodes.end(),
                  node.name()) != job.reported_failed_nodes.end() &&
        node.last_heartbeat_unix_ms() < reported_ms;
    if (!suspect) placeable.push_back(node);
  }
  return placeable;
}

bool ServesCudaGpu(const v1::NodeInfo& node) {
  return job::ServedDeviceKind(node.resources().device()) == v1::CUDA;
}

bool WantsCudaGpu(const v1::JobSpec& spec) { return job::JobDevice(spec) == v1::CUDA; }

// The workers a job of `spec` may take, in the order it takes them: CUDA
// jobs only those serving a CUDA GPU; CPU jobs every worker, those serving
// none first, so GPUs stay free for the jobs that need them.
std::vector<v1::NodeInfo> WorkersForDevice(const v1::JobSpec& spec,
                                           std::vector<v1::NodeInfo> workers) {
  if (WantsCudaGpu(spec)) {
    std::erase_if(workers, [](const v1::NodeInfo& node) { return !ServesCudaGpu(node); });
  } else {
    std::stable_partition(workers.begin(), workers.end(),
                          [](const v1::NodeInfo& node) { return !ServesCudaGpu(node); });
  }
  return workers;
}

// Why a CUDA job waits: how many of the registered workers serve a GPU at
// all, so "none does" reads differently from "all are busy".
std::string CudaWaitingReason(const v1::JobSpec& spec, int wanted, size_t free_gpu_workers,
                              const std::vector<v1::NodeInfo>& registry) {
  int workers = 0, gpu_workers = 0;
  for (const v1::NodeInfo& node : registry) {
    if (node.role() != v1::WORKER || node.state() == v1::DEAD ||
        node.state() == v1::DEREGISTERED) {
      continue;
    }
    ++workers;
    if (ServesCudaGpu(node)) ++gpu_workers;
  }
  std::string reason = absl::StrFormat(
      "waiting for %d healthy free workers with a CUDA GPU (device: cuda; %d free now); %d of %d "
      "registered workers serve one",
      wanted, free_gpu_workers, gpu_workers, workers);
  std::vector<std::string> pinned_without;
  for (const std::string& name : spec.placement().node_names()) {
    const bool gpu = std::any_of(registry.begin(), registry.end(), [&](const v1::NodeInfo& n) {
      return n.name() == name && ServesCudaGpu(n);
    });
    if (!gpu) pinned_without.push_back(name);
  }
  if (!pinned_without.empty()) {
    absl::StrAppend(&reason, "; pinned ", absl::StrJoin(pinned_without, ", "),
                    pinned_without.size() == 1 ? " serves" : " serve", " no CUDA GPU");
  }
  if (gpu_workers == 0) absl::StrAppend(&reason, " (start corescape-worker --device=cuda:N)");
  return reason;
}

// The distinct roots `workers` reported (`root_of` picks which), a few of
// them: for reasons and refusals a person reads.
std::string RootsText(const std::vector<v1::NodeInfo>& workers,
                      const std::string& (v1::Resources::*root_of)() const) {
  constexpr size_t kShown = 4;
  std::set<std::string> roots;
  for (const v1::NodeInfo& worker : workers) {
    const std::string& root = (worker.resources().*root_of)();
    if (!root.empty()) roots.insert(root);
  }
  std::vector<std::string> shown(roots.begin(), roots.end());
  if (shown.size() <= kShown) return absl::StrJoin(shown, ", ");
  shown.resize(kShown);
  return absl::StrCat(absl::StrJoin(shown, ", "), " and ", roots.size() - kShown, " more");
}

std::string CheckpointRootsText(const std::vector<v1::NodeInfo>& workers) {
  return RootsText(workers, &v1::Resources::checkpoint_root);
}

std::string DataRootsText(const std::vector<v1::NodeInfo>& workers) {
  return RootsText(workers, &v1::Resources::data_root);
}

// Step 3 for one waiting job over the free nodes: its assignment, or why it
// waits (nullopt: it waits and its reason stands).
std::optional<PlacementDecision> PlaceWaitingJob(const JobInPass& pass,
                                                 const std::vector<v1::NodeInfo>& free_workers,
                                                 const std::vector<v1::NodeInfo>& free_servers,
                                                 const std::vector<v1::NodeInfo>& registry,
                                                 absl::Time now,
                                                 const PlacementOptions& options) {
  const v1::Job& job = pass.in->job;
  const v1::JobSpec& spec = job.spec();
  auto waiting = [&](std::string reason) -> std::optional<PlacementDecision> {
    if (pass.state != v1::PENDING || job.state_reason() == reason) return std::nullopt;
    return WaitingReason{job.job_id(), std::move(reason)};
  };
  const int wanted = spec.placement().workers();
  const int servers_wanted = AttentionServersWanted(spec);
  if (static_cast<int>(free_servers.size()) < servers_wanted) {
    return waiting(absl::StrFormat("waiting for %d healthy free attention servers (%d free now)",
                                   servers_wanted, free_servers.size()));
  }
  const std::vector<v1::NodeInfo> free = WorkersForDevice(spec, free_workers);
  std::vector<v1::NodeInfo> holding, outside_root, outside_data_root;
  for (const v1::NodeInfo& worker : free) {
    if (!HoldsCheckpointDirectory(worker, pass.in->checkpoint_directory)) {
      outside_root.push_back(worker);
    } else if (!HoldsDatasets(worker, spec.data())) {
      outside_data_root.push_back(worker);
    } else {
      holding.push_back(worker);
    }
  }
  const std::vector<v1::NodeInfo> placeable = PlaceableWorkers(*pass.in, holding);
  AssignJob assign;
  assign.job_id = job.job_id();
  assign.gradient_accumulation = spec.data().gradient_accumulation();
  std::vector<v1::NodeInfo>& chosen = assign.workers;
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
  if (chosen.empty() && pass.state == v1::RECOVERING && spec.placement().min_workers() < wanted &&
      spec.placement().node_names().empty() &&
      now - pass.recovering_since >= options.elastic_grace) {
    // Elastic: fewer workers, more accumulation, the same global batch.
    const int64_t global_micro_batches = int64_t{wanted} * assign.gradient_accumulation;
    for (int world = std::min<int>(wanted - 1, placeable.size());
         world >= std::max(1, spec.placement().min_workers()); --world) {
      if (global_micro_batches % world == 0) {
        chosen.assign(placeable.begin(), placeable.begin() + world);
        assign.gradient_accumulation = static_cast<int32_t>(global_micro_batches / world);
        break;
      }
    }
  }
  if (chosen.empty()) {
    std::string reason =
        WantsCudaGpu(spec)
            ? CudaWaitingReason(spec, wanted, free.size(), registry)
            : absl::StrFormat("waiting for %d healthy free workers (%d free now)", wanted,
                              free.size());
    if (!outside_root.empty()) {
      absl::StrAppend(&reason, "; checkpoint.directory ", spec.checkpoint().directory(),
                      " is outside the checkpoint root of ", outside_root.size(), " of them (",
                      CheckpointRootsText(outside_root), "; corescape-worker --checkpoint_root)");
    }
    if (!outside_data_root.empty()) {
      absl::StrAppend(&reason, "; its datasets are outside the data root of ",
                      outside_data_root.size(), " of them (", DataRootsText(outside_data_root),
                      "; corescape-worker --data_root)");
    }
    if (placeable.size() < holding.size()) {
      absl::StrAppend(&reason, "; ", holding.size() - placeable.size(),
                      " of the failed generation's workers silent since its failure report");
    }
    return waiting(std::move(reason));
  }
  assign.servers.assign(free_servers.begin(), free_servers.begin() + servers_wanted);
  return assign;
}

void RemoveNodes(std::vector<v1::NodeInfo>& from, const std::vector<v1::NodeInfo>& taken) {
  std::erase_if(from, [&](const v1::NodeInfo& node) {
    return std::any_of(taken.begin(), taken.end(),
                       [&](const v1::NodeInfo& t) { return t.name() == node.name(); });
  });
}

// One PlaceJobs call: the jobs as its decisions so far leave them.
class Pass {
 public:
  Pass(const PlacementSnapshot& snapshot, const PlacementOptions& options)
      : now_(snapshot.now), options_(options), registry_(snapshot.nodes) {
    for (const v1::NodeInfo& node : snapshot.nodes) nodes_[node.name()] = node;
    for (const PlacementJob& job : snapshot.jobs) {
      jobs_.push_back({&job, job.job.state(), job.recovering_since});
    }
    std::sort(jobs_.begin(), jobs_.end(), [](const JobInPass& a, const JobInPass& b) {
      return a.in->job.job_id() < b.in->job.job_id();
    });
  }

  // 1. Running jobs that lost a worker recover; the others hold their nodes
  //    (less the attention servers they lost).
  void RecoverBrokenJobs() {
    for (JobInPass& pass : jobs_) {
      const v1::Job& job = pass.in->job;
      if (pass.state != v1::RUNNING) continue;
      if (std::optional<std::string> cause = LostWorker(job, nodes_)) {
        Recovered(pass, Recover(job, *std::move(cause), options_.max_recoveries));
        continue;
      }
      pass.lost_servers = FindLostAttentionServers(job, nodes_);
      const int workers = WorkerCount(job);
      for (int rank = 0; rank < job.assigned_nodes_size(); ++rank) {
        const bool gone = std::any_of(
            pass.lost_servers.begin(), pass.lost_servers.end(),
            [&](const LostAttentionServer& l) { return workers + l.index == rank; });
        if (!gone) pass.held.push_back(job.assigned_nodes(rank));
      }
      const bool short_of_servers =
          job.spec().attention().mode() == v1::DISAGGREGATED &&
          AssignedAttentionServers(job) < job.spec().attention().attention_servers();
      pass.replan = !pass.lost_servers.empty() || short_of_servers;
    }
  }

  // 2. Re-plan attention over the survivors and the spare servers.
  void ReplanAttentionServers() {
    std::vector<v1::NodeInfo> spare_servers = Free(v1::ATTENTION_SERVER);
    for (JobInPass& pass : jobs_) {
      if (!pass.replan) continue;
      const v1::Job& job = pass.in->job;
      std::optional<PlacementDecision> decision = ReplanAttentionOf(
          job, pass.lost_servers, nodes_, spare_servers, options_.max_recoveries);
      if (!decision) {
        // Unchanged: it keeps every node it has, drained servers included.
        pass.held.assign(job.assigned_nodes().begin(), job.assigned_nodes().end());
      } else if (auto* recover = std::get_if<RecoverJob>(&*decision)) {
        Recovered(pass, std::move(*recover));
      } else {
        const auto& replan = std::get<ReplanAttention>(*decision);
        pass.held.clear();
        for (const auto* group : {&replan.workers, &replan.servers}) {
          for (const v1::NodeInfo& node : *group) pass.held.push_back(node.name());
        }
        decisions_.push_back(std::move(*decision));
      }
    }
  }

  // 3. Place waiting jobs, oldest first, on free healthy nodes (gang).
  void PlaceWaitingJobs() {
    std::vector<v1::NodeInfo> free = Free(v1::WORKER);
    std::vector<v1::NodeInfo> free_servers = Free(v1::ATTENTION_SERVER);
    std::vector<const JobInPass*> waiting;
    for (const JobInPass& pass : jobs_) {
      if (pass.state == v1::PENDING || pass.state == v1::RECOVERING) waiting.push_back(&pass);
    }
    std::stable_sort(waiting.begin(), waiting.end(), [](const JobInPass* a, const JobInPass* b) {
      return a->in->job.submitted_unix_ms() < b->in->job.submitted_unix_ms();
    });
    for (const JobInPass* pass : waiting) {
      std::optional<PlacementDecision> decision =
          PlaceWaitingJob(*pass, free, free_servers, registry_, now_, options_);
      if (!decision) continue;
      if (const auto* assign = std::get_if<AssignJob>(&*decision)) {
        RemoveNodes(free, assign->workers);
        RemoveNodes(free_servers, assign->servers);
      }
      decisions_.push_back(std::move(*decision));
    }
  }

  std::vector<PlacementDecision> TakeDecisions() { return std::move(decisions_); }

 private:
  void Recovered(JobInPass& pass, RecoverJob recover) {
    pass.state = recover.recovery.state;
    pass.recovering_since = now_;
    pass.held.clear();
    decisions_.push_back(std::move(recover));
  }

  // ALIVE nodes of `role` that no running job holds, in name order.
  std::vector<v1::NodeInfo> Free(v1::NodeRole role) const {
    std::set<std::string> held;
    for (const JobInPass& pass : jobs_) held.insert(pass.held.begin(), pass.held.end());
    std::vector<v1::NodeInfo> free;
    for (const auto& [name, node] : nodes_) {
      if (node.state() == v1::ALIVE && node.role() == role && !held.count(name)) {
        free.push_back(node);
      }
    }
    return free;
  }

  const absl::Time now_;
  const PlacementOptions& options_;
  const std::vector<v1::NodeInfo>& registry_;
  NodesByName nodes_;
  std::vector<JobInPass> jobs_;
  std::vector<PlacementDecision> decisions_;
};

}  // namespace

Recovery RecoveryOf(const v1::Job& job, const std::string& cause, int max_recoveries) {
  if (job.recoveries() >= max_recoveries) {
    return {v1::FAILED, absl::StrCat(cause, "; gave up after ", job.recoveries(), " recoveries")};
  }
  const int64_t checkpoint = job.progress().checkpoint_step();
  // Which checkpoint is restored is known only once the workers verified it
  // (an event then names it): this says what is asked for.
  return {v1::RECOVERING,
          absl::StrCat(cause, "; restarting from ",
                       checkpoint >= 0
                           ? absl::StrCat("the newest checkpoint that verifies, up to step ",
                                          checkpoint)
                           : std::string("the start (no checkpoint yet)"))};
}

bool HoldsCheckpointDirectory(const v1::NodeInfo& worker, const std::string& directory) {
  const std::string& root = worker.resources().checkpoint_root();
  return directory.empty() || root.empty() || job::ResolvedPathWithin(directory, root);
}

namespace {

bool HoldsDataset(const v1::NodeInfo& worker, const std::string& dataset) {
  const std::string& root = worker.resources().data_root();
  return root.empty() || job::ResolvedPathWithin(dataset, root);
}

}  // namespace

bool HoldsDatasets(const v1::NodeInfo& worker, const v1::DataSpec& data) {
  for (const auto* paths : {&data.train_shards(), &data.validation_shards()}) {
    for (const std::string& path : *paths) {
      if (!HoldsDataset(worker, path)) return false;
    }
  }
  return true;
}

absl::Status CheckSomeWorkerHoldsDatasets(const v1::JobSpec& spec,
                                          const std::vector<v1::NodeInfo>& registry) {
  std::vector<v1::NodeInfo> workers;
  for (const v1::NodeInfo& node : registry) {
    if (node.role() != v1::WORKER) continue;
    if (HoldsDatasets(node, spec.data())) return absl::OkStatus();
    workers.push_back(node);
  }
  if (workers.empty()) return absl::OkStatus();
  const std::string remedy = absl::StrCat(
      " (", DataRootsText(workers),
      "); choose a dataset under one, or start a worker with --data_root holding it");
  // Compared as written (absolute, no `..`: ValidateJobSpec), never looked up
  // here: the refusal is the same whether the path exists anywhere or not.
  for (const auto& [field, paths] :
       {std::pair{"data.train_shards", &spec.data().train_shards()},
        std::pair{"data.validation_shards", &spec.data().validation_shards()}}) {
    for (int i = 0; i < paths->size(); ++i) {
      const std::string& path = (*paths)[i];
      if (std::none_of(workers.begin(), workers.end(),
                       [&](const v1::NodeInfo& w) { return HoldsDataset(w, path); })) {
        return absl::InvalidArgumentError(absl::StrCat(
            "spec.", field, "[", i, "]: ", path,
            " is outside the data root of every registered worker", remedy));
      }
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "spec.data: no registered worker's data root holds all of the job's datasets", remedy));
}

absl::Status CheckSomeWorkerHoldsCheckpoints(const v1::JobSpec& spec, const std::string& directory,
                                             const std::vector<v1::NodeInfo>& registry) {
  std::vector<v1::NodeInfo> workers;
  for (const v1::NodeInfo& node : registry) {
    if (node.role() != v1::WORKER) continue;
    if (HoldsCheckpointDirectory(node, directory)) return absl::OkStatus();
    workers.push_back(node);
  }
  if (workers.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "spec.checkpoint.directory: ", spec.checkpoint().directory(),
      directory == spec.checkpoint().directory() ? "" : absl::StrCat(" (", directory, ")"),
      " is outside the checkpoint root of every registered worker (",
      CheckpointRootsText(workers),
      "); choose a directory under one, or start a worker with --checkpoint_root holding it"));
}

std::vector<PlacementDecision> PlaceJobs(const PlacementSnapshot& snapshot,
                                         const PlacementOptions& options) {
  Pass pass(snapshot, options);
  pass.RecoverBrokenJobs();
  pass.ReplanAttentionServers();
  pass.PlaceWaitingJobs();
  return pass.TakeDecisions();
}

}  // namespace corescape::scheduler
