#include "scheduler/placement.h"

#include <algorithm>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace corescape::scheduler {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1000);
const PlacementOptions kOptions{absl::Seconds(5), /*max_recoveries=*/5};

v1::NodeInfo Node(const std::string& name, v1::NodeRole role, v1::NodeState state = v1::ALIVE,
                  uint64_t incarnation = 1) {
  v1::NodeInfo node;
  node.set_name(name);
  node.set_role(role);
  node.set_state(state);
  node.set_incarnation(incarnation);
  node.set_data_address("data-" + name);
  node.set_last_heartbeat_unix_ms(absl::ToUnixMillis(kNow));
  return node;
}

v1::NodeInfo Worker(const std::string& name, v1::NodeState state = v1::ALIVE,
                    uint64_t incarnation = 1) {
  return Node(name, v1::WORKER, state, incarnation);
}

// A worker daemon serving CUDA GPU `index` of its node (--device=cuda:N).
v1::NodeInfo GpuWorker(const std::string& name, int index = 0, v1::NodeState state = v1::ALIVE) {
  v1::NodeInfo node = Node(name, v1::WORKER, state);
  v1::ServedDevice& device = *node.mutable_resources()->mutable_device();
  device.set_kind(v1::CUDA);
  device.set_cuda_index(index);
  device.set_gpu_model("NVIDIA H200");
  return node;
}

// A worker that reported its --checkpoint_root.
v1::NodeInfo RootedWorker(const std::string& name, const std::string& root,
                          v1::NodeState state = v1::ALIVE) {
  v1::NodeInfo node = Worker(name, state);
  node.mutable_resources()->set_checkpoint_root(root);
  return node;
}

// A worker that reported its --data_root.
v1::NodeInfo DataWorker(const std::string& name, const std::string& data_root,
                        v1::NodeState state = v1::ALIVE) {
  v1::NodeInfo node = Worker(name, state);
  node.mutable_resources()->set_data_root(data_root);
  return node;
}

v1::NodeInfo Server(const std::string& name, v1::NodeState state = v1::ALIVE,
                    uint64_t incarnation = 1) {
  return Node(name, v1::ATTENTION_SERVER, state, incarnation);
}

v1::NodeInfo HeardAt(v1::NodeInfo node, absl::Time at) {
  node.set_last_heartbeat_unix_ms(absl::ToUnixMillis(at));
  return node;
}

// A job as the job manager would hold it, built up by its placement so far.
class JobBuilder {
 public:
  // PENDING, `workers` wanted, submitted `submitted_s` seconds after the
  // epoch (queue order).
  JobBuilder(const std::string& id, int workers, int submitted_s = 0) {
    v1::Job& job = job_.job;
    job.set_job_id(id);
    job.set_state(v1::PENDING);
    job.set_state_reason("queued");
    job.set_submitted_unix_ms(submitted_s * 1000);
    job.mutable_spec()->mutable_placement()->set_workers(workers);
    job.mutable_spec()->mutable_placement()->set_min_workers(workers);
    job.mutable_spec()->mutable_data()->set_gradient_accumulation(1);
    job.set_gradient_accumulation(1);
    job.mutable_progress()->set_checkpoint_step(-1);
  }
  JobBuilder& Disaggregated(int servers) {
    job_.job.mutable_spec()->mutable_attention()->set_mode(v1::DISAGGREGATED);
    job_.job.mutable_spec()->mutable_attention()->set_attention_servers(servers);
    return *this;
  }
  JobBuilder& Cuda() {
    job_.job.mutable_spec()->set_device(v1::CUDA);
    return *this;
  }
  // Checkpoints in `directory` (resolved as the job manager's snapshot
  // resolves it: here, already).
  JobBuilder& CheckpointsIn(const std::string& directory) {
    job_.job.mutable_spec()->mutable_checkpoint()->set_directory(directory);
    job_.checkpoint_directory = directory;
    return *this;
  }
  JobBuilder& TrainsOn(const std::string& dataset) {
    job_.job.mutable_spec()->mutable_data()->add_train_shards(dataset);
    return *this;
  }
  JobBuilder& Elastic(int min_workers, int accumulation = 1) {
    job_.job.mutable_spec()->mutable_placement()->set_min_workers(min_workers);
    job_.job.mutable_spec()->mutable_data()->set_gradient_accumulation(accumulation);
    return *this;
  }
  JobBuilder& Pinned(const std::vector<std::string>& names) {
    for (const std::string& name : names) {
      job_.job.mutable_spec()->mutable_placement()->add_node_names(name);
    }
    return *this;
  }
  // RUNNING generation 1 on these nodes (incarnation 1 unless given).
  JobBuilder& Running(const std::vector<std::string>& workers,
                      const std::vector<std::string>& servers = {},
                      const std::map<std::string, uint64_t>& incarnations = {}) {
    v1::Job& job = job_.job;
    job.set_state(v1::RUNNING);
    job.set_generation(1);
    for (const auto* group : {&workers, &servers}) {
      for (const std::string& name : *group) {
        job.add_assigned_nodes(name);
        auto it = incarnations.find(name);
        job.add_assigned_incarnations(it == incarnations.end() ? 1 : it->second);
      }
    }
    job.set_assigned_attention_servers(static_cast<int32_t>(servers.size()));
    return *this;
  }
  JobBuilder& Recovering(absl::Time since) {
    job_.job.set_state(v1::RECOVERING);
    job_.job.set_generation(1);
    job_.recovering_since = since;
    return *this;
  }
  JobBuilder& Reported(const std::vector<std::string>& failed, absl::Time at) {
    job_.reported_failed_nodes = failed;
    job_.reported_failure_at = at;
    return *this;
  }
  JobBuilder& Recoveries(int recoveries) {
    job_.job.set_recoveries(recoveries);
    return *this;
  }
  JobBuilder& Checkpoint(int64_t step) {
    job_.job.mutable_progress()->set_checkpoint_step(step);
    return *this;
  }
  JobBuilder& AttentionEpoch(uint64_t epoch) {
    job_.job.set_attention_epoch(epoch);
    return *this;
  }
  JobBuilder& Reason(const std::string& reason) {
    job_.job.set_state_reason(reason);
    return *this;
  }
  operator PlacementJob() const { return job_; }

 private:
  PlacementJob job_;
};

std::string Names(const std::vector<v1::NodeInfo>& nodes) {
  std::vector<std::string> names;
  for (const v1::NodeInfo& node : nodes) names.push_back(node.name());
  return absl::StrJoin(names, ",");
}

// One line per decision, enough to tell every decision apart.
std::string Describe(const PlacementDecision& decision) {
  if (const auto* d = std::get_if<RecoverJob>(&decision)) {
    EXPECT_TRUE(absl::StartsWith(d->recovery.reason, d->cause)) << d->recovery.reason;
    return absl::StrCat("recover ", d->job_id, " ", v1::JobState_Name(d->recovery.state), ": ",
                        d->recovery.reason);
  }
  if (const auto* d = std::get_if<ReplanAttention>(&decision)) {
    std::vector<std::string> leaving;
    for (const LostAttentionServer& l : d->leaving) {
      leaving.push_back(absl::StrCat(l.name, "#", l.incarnation));
    }
    return absl::StrCat("replan ", d->job_id, " ", Names(d->workers), " + ", Names(d->servers),
                        leaving.empty() ? "" : " leaving " + absl::StrJoin(leaving, ","),
                        " [", d->event_node, "]: ", d->reason);
  }
  if (const auto* d = std::get_if<AssignJob>(&decision)) {
    return absl::StrCat("assign ", d->job_id, " ", Names(d->workers),
                        d->servers.empty() ? "" : " + " + Names(d->servers),
                        " accumulation ", d->gradient_accumulation);
  }
  const auto& d = std::get<WaitingReason>(decision);
  return absl::StrCat("wait ", d.job_id, ": ", d.reason);
}

std::vector<std::string> Describe(const std::vector<PlacementDecision>& decisions) {
  std::vector<std::string> lines;
  for (const PlacementDecision& decision : decisions) lines.push_back(Describe(decision));
  return lines;
}

struct Case {
  std::string name;
  std::vector<v1::NodeInfo> nodes;
  std::vector<PlacementJob> jobs;
  std::vector<std::string> want;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> Cases() {
  const absl::Time reported = kNow - absl::Seconds(1);
  return {
      // Gang scheduling and queue order.
      {"NoPartialPlacement",
       {Worker("w0")},
       {JobBuilder("job-1", 2)},
       {"wait job-1: waiting for 2 healthy free workers (1 free now)"}},
      {"UnchangedReasonIsNotRewritten",
       {Worker("w0")},
       {JobBuilder("job-1", 2).Reason("waiting for 2 healthy free workers (1 free now)")},
       {}},
      {"GangTakesWorkersInNameOrder",
       {Worker("w2"), Worker("w0"), Worker("w1")},
       {JobBuilder("job-1", 2)},
       {"assign job-1 w0,w1 accumulation 1"}},
      {"OldestSubmissionFirstNotJobId",
       {Worker("w0"), Worker("w1")},
       {JobBuilder("job-10", 2, /*submitted_s=*/1), JobBuilder("job-9", 2, /*submitted_s=*/2)},
       {"assign job-10 w0,w1 accumulation 1",
        "wait job-9: waiting for 2 healthy free workers (0 free now)"}},
      {"BlockedOlderJobDoesNotHoldBackYounger",
       {Worker("w0"), Worker("w1")},
       {JobBuilder("job-1", 3, 1), JobBuilder("job-2", 1, 2)},
       {"wait job-1: waiting for 3 healthy free workers (2 free now)",
        "assign job-2 w0 accumulation 1"}},
      {"OnlyAliveWorkersAreFree",
       {Worker("w0", v1::DRAINING), Worker("w1", v1::DEAD), Worker("w2", v1::DEREGISTERED),
        Worker("w3"), Server("a0")},
       {JobBuilder("job-1", 2)},
       {"wait job-1: waiting for 2 healthy free workers (1 free now)"}},
      {"RunningJobsHoldTheirWorkers",
       {Worker("w0"), Worker("w1"), Worker("w2")},
       {JobBuilder("job-1", 2).Running({"w1", "w2"}), JobBuilder("job-2", 1)},
       {"assign job-2 w0 accumulation 1"}},
      {"DrainingWorkerKeepsItsJob",
       {Worker("w0", v1::DRAINING), Worker("w1")},
       {JobBuilder("job-1", 2).Running({"w0", "w1"})},
       {}},
      {"PinnedJobTakesTheNamedNodesRankedAsNamed",
       {Worker("w0"), Worker("w1"), Worker("w2")},
       {JobBuilder("job-1", 2).Pinned({"w2", "w0"})},
       {"assign job-1 w2,w0 accumulation 1"}},
      {"PinnedJobWaitsForItsNodes",
       {Worker("w0"), Worker("w1"), Worker("w2", v1::DRAINING)},
       {JobBuilder("job-1", 2).Pinned({"w2", "w0"})},
       {"wait job-1: waiting for 2 healthy free workers (2 free now)"}},

      // Failures of RUNNING jobs (observe), re-placed in the same pass.
      {"DeadWorkerRecoversOntoASpare",
       {Worker("w0"), Worker("w1", v1::DEAD), Worker("w2")},
       {JobBuilder("job-1", 2).Running({"w0", "w1"}).Checkpoint(2)},
       {"recover job-1 RECOVERING: rank 1 (w1) is DEAD; restarting from the newest checkpoint "
        "that verifies, up to step 2",
        "assign job-1 w0,w2 accumulation 1"}},
      {"DeregisteredWorkerWithoutCheckpointRestartsFromTheStart",
       {Worker("w0", v1::DEREGISTERED), Worker("w1")},
       {JobBuilder("job-1", 2).Running({"w0", "w1"})},
       {"recover job-1 RECOVERING: rank 0 (w0) is DEREGISTERED; restarting from the start (no "
        "checkpoint yet)"}},
      {"VanishedWorker",
       {Worker("w0")},
       {JobBuilder("job-1", 2).Running({"w0", "w1"})},
       {"recover job-1 RECOVERING: rank 1 (w1) vanished; restarting from the start (no "
        "checkpoint yet)"}},
      {"RestartedWorkerIsANewProcessAndRejoins",
       {Worker("w0"), Worker("w1", v1::ALIVE, /*incarnation=*/2)},
       {JobBuilder("job-1", 2).Running({"w0", "w1"})},
       {"recover job-1 RECOVERING: rank 1 (w1) restarted (incarnation 2); restarting from the "
        "start (no checkpoint yet)",
        "assign job-1 w0,w1 accumulation 1"}},
      {"RecoveryBudgetSpentFailsAndFreesTheNodes",
       {Worker("w0"), Worker("w1", v1::DEAD)},
       {JobBuilder("job-1", 2).Running({"w0", "w1"}).Recoveries(5), JobBuilder("job-2", 1, 1)},
       {"recover job-1 FAILED: rank 1 (w1) is DEAD; gave up after 5 recoveries",
        "assign job-2 w0 accumulation 1"}},
      {"LastRecoveryOfTheBudgetStillRecovers",
       {Worker("w0"), Worker("w1", v1::DEAD)},
       {JobBuilder("job-1", 2).Running({"w0", "w1"}).Recoveries(4)},
       {"recover job-1 RECOVERING: rank 1 (w1) is DEAD; restarting from the start (no "
        "checkpoint yet)"}},

      // After a failure report.
      {"FailureReportAvoidsWorkersSilentSinceIt",
       {HeardAt(Worker("w0"), reported + absl::Seconds(1)),
        HeardAt(Worker("w1"), reported - absl::Seconds(1)), Worker("w2")},
       {JobBuilder("job-1", 2).Recovering(reported).Reported({"w0", "w1"}, reported)},
       {"assign job-1 w0,w2 accumulation 1"}},
      {"FailureReportWaitsForSilentWorkers",
       {HeardAt(Worker("w0"), reported - absl::Seconds(1)),
        HeardAt(Worker("w1"), reported - absl::Seconds(1))},
       {JobBuilder("job-1", 2).Recovering(reported).Reported({"w0", "w1"}, reported)},
       {}},
      {"WorkersHeardSinceTheReportArePlaceableAgain",
       {HeardAt(Worker("w0"), reported + absl::Seconds(1)),
        HeardAt(Worker("w1"), reported + absl::Seconds(1))},
       {JobBuilder("job-1", 2).Recovering(reported).Reported({"w0", "w1"}, reported)},
       {"assign job-1 w0,w1 accumulation 1"}},
      {"SilentWorkerIsOnlySuspectForTheReportingJob",
       {Worker("w0"), HeardAt(Worker("w1"), reported - absl::Seconds(1)), Worker("w2")},
       {JobBuilder("job-1", 2, 1).Recovering(reported).Reported({"w0", "w1"}, reported),
        JobBuilder("job-2", 1, 2)},
       {"assign job-1 w0,w2 accumulation 1", "assign job-2 w1 accumulation 1"}},
      {"PendingReasonCountsTheSilentWorkers",
       {Worker("w0"), HeardAt(Worker("w1"), reported - absl::Seconds(1))},
       {JobBuilder("job-1", 2).Reported({"w0", "w1"}, reported)},
       {"wait job-1: waiting for 2 healthy free workers (2 free now); 1 of the failed "
        "generation's workers silent since its failure report"}},

      // Elastic shrink.
      {"ElasticJobWaitsOutTheGrace",
       {Worker("w0")},
       {JobBuilder("job-1", 2).Elastic(1).Recovering(kNow - absl::Seconds(4))},
       {}},
      {"ElasticJobShrinksAfterTheGraceAndRaisesAccumulation",
       {Worker("w0")},
       {JobBuilder("job-1", 2).Elastic(1).Recovering(kNow - absl::Seconds(5))},
       {"assign job-1 w0 accumulation 2"}},
      {"ElasticWorldDividesTheGlobalBatch",
       {Worker("w0"), Worker("w1"), Worker("w2")},
       {JobBuilder("job-1", 4).Elastic(2).Recovering(kNow - absl::Seconds(5))},
       {"assign job-1 w0,w1 accumulation 2"}},
      {"ElasticNeverBelowMinWorkers",
       {Worker("w0")},
       {JobBuilder("job-1", 4).Elastic(2).Recovering(kNow - absl::Seconds(5))},
       {}},
      {"ElasticKeepsAccumulationRatio",
       {Worker("w0"), Worker("w1"), Worker("w2")},
       {JobBuilder("job-1", 4).Elastic(1, /*accumulation=*/3).Recovering(kNow - absl::Seconds(9))},
       {"assign job-1 w0,w1,w2 accumulation 4"}},
      {"PendingElasticJobDoesNotShrink",
       {Worker("w0")},
       {JobBuilder("job-1", 2).Elastic(1)},
       {"wait job-1: waiting for 2 healthy free workers (1 free now)"}},
      {"PinnedElasticJobDoesNotShrink",
       {Worker("w0"), Worker("w1", v1::DEAD)},
       {JobBuilder("job-1", 2).Elastic(1).Pinned({"w0", "w1"}).Recovering(kNow - absl::Hours(1))},
       {}},
      {"ElasticShrinkSkipsSilentWorkers",
       {Worker("w0"), HeardAt(Worker("w1"), reported - absl::Seconds(1))},
       {JobBuilder("job-1", 2)
            .Elastic(1)
            .Recovering(kNow - absl::Seconds(6))
            .Reported({"w0", "w1"}, reported)},
       {"assign job-1 w0 accumulation 2"}},

      // Attention servers: gang placement.
      {"DisaggregatedJobWaitsForAllItsServers",
       {Worker("w0"), Worker("w1"), Server("a0")},
       {JobBuilder("job-1", 2).Disaggregated(2)},
       {"wait job-1: waiting for 2 healthy free attention servers (1 free now)"}},
      {"DisaggregatedJobGangPlacesServersInNameOrder",
       {Worker("w0"), Worker("w1"), Server("a2"), Server("a0"), Server("a1")},
       {JobBuilder("job-1", 2).Disaggregated(2)},
       {"assign job-1 w0,w1 + a0,a1 accumulation 1"}},
      {"DrainingServersAreNotPlaced",
       {Worker("w0"), Server("a0", v1::DRAINING), Server("a1")},
       {JobBuilder("job-1", 1).Disaggregated(2)},
       {"wait job-1: waiting for 2 healthy free attention servers (1 free now)"}},
      {"ColocatedJobTakesNoServers",
       {Worker("w0"), Worker("w1"), Server("a0")},
       {JobBuilder("job-1", 1).Disaggregated(1).Running({"w0"}, {"a0"}), JobBuilder("job-2", 1)},
       {"assign job-2 w1 accumulation 1"}},
      {"ServersOfARunningJobAreNotFree",
       {Worker("w0"), Worker("w1"), Server("a0")},
       {JobBuilder("job-1", 1).Disaggregated(1).Running({"w0"}, {"a0"}),
        JobBuilder("job-2", 1).Disaggregated(1)},
       {"wait job-2: waiting for 1 healthy free attention servers (0 free now)"}},

      // Attention servers lost by RUNNING jobs: re-planned, same generation.
      {"DeadServerIsPlannedWithout",
       {Worker("w0"), Worker("w1"), Server("a0", v1::DEAD), Server("a1")},
       {JobBuilder("job-1", 2).Disaggregated(2).Running({"w1", "w0"}, {"a0", "a1"})},
       {"replan job-1 w1,w0 + a1 [a0]: attention server 0 (a0) is DEAD; re-planned over 1 "
        "attention server (a1) in attention epoch 1, generation 1 continues"}},
      {"RestartedServerRejoinsAsItsOwnReplacement",
       {Worker("w0"), Server("a0", v1::ALIVE, 2), Server("b0")},
       {JobBuilder("job-1", 1).Disaggregated(1).Running({"w0"}, {"a0"})},
       {"replan job-1 w0 + a0 [a0]: attention server 0 (a0) restarted (incarnation 2); "
        "attention server a0 joined; re-planned over 1 attention server (a0) in attention "
        "epoch 1, generation 1 continues"}},
      {"ShortJobGrowsBackWhenAServerFrees",
       {Worker("w0"), Server("a0"), Server("b0")},
       {JobBuilder("job-1", 1).Disaggregated(2).Running({"w0"}, {"a0"}).AttentionEpoch(1)},
       {"replan job-1 w0 + a0,b0 [b0]: attention server b0 joined; re-planned over 2 attention "
        "servers (a0, b0) in attention epoch 2, generation 1 continues"}},
      {"ShortJobWithoutSpareChangesNothing",
       {Worker("w0"), Server("a0")},
       {JobBuilder("job-1", 1).Disaggregated(2).Running({"w0"}, {"a0"})},
       {}},
      {"DrainedOnlyServerKeepsServingWithoutReplacement",
       {Worker("w0"), Worker("w1"), Server("a0", v1::DRAINING)},
       {JobBuilder("job-1", 1).Disaggregated(1).Running({"w0"}, {"a0"}),
        JobBuilder("job-2", 1).Disaggregated(1)},
       {"wait job-2: waiting for 1 healthy free attention servers (0 free now)"}},
      {"DrainedServerIsReplacedAndLeaves",
       {Worker("w0"), Server("a0", v1::DRAINING, 3), Server("b0"), Server("b1")},
       {JobBuilder("job-1", 1).Disaggregated(2).Running({"w0"}, {"a0"}, {{"a0", 3}})},
       {"replan job-1 w0 + b0,b1 leaving a0#3 [a0]: attention server 0 (a0) is draining; "
        "attention servers b0, b1 joined; re-planned over 2 attention servers (b0, b1) in "
        "attention epoch 1, generation 1 continues"}},
      {"LastServerLostWithoutSpareRecovers",
       {Worker("w0"), Worker("w1"), Server("a0", v1::DEREGISTERED)},
       {JobBuilder("job-1", 1).Disaggregated(1).Running({"w0"}, {"a0"}).Checkpoint(2),
        JobBuilder("job-2", 2, 1)},
       {"recover job-1 RECOVERING: attention server 0 (a0) is DEREGISTERED; no attention server "
        "left; restarting from the newest checkpoint that verifies, up to step 2",
        "assign job-2 w0,w1 accumulation 1"}},
      {"LastServerLostPastTheBudgetFails",
       {Worker("w0"), Server("a0", v1::DEAD)},
       {JobBuilder("job-1", 1).Disaggregated(1).Running({"w0"}, {"a0"}).Recoveries(5)},
       {"recover job-1 FAILED: attention server 0 (a0) is DEAD; no attention server left; gave "
        "up after 5 recoveries"}},
      {"SparesGoToJobsInJobIdOrder",
       {Worker("w0"), Worker("w1"), Server("a0", v1::DEAD), Server("a1", v1::DEAD),
        Server("b0"), Server("c0")},
       {JobBuilder("job-2", 1).Disaggregated(1).Running({"w1"}, {"a1"}),
        JobBuilder("job-1", 1).Disaggregated(1).Running({"w0"}, {"a0"})},
       {"replan job-1 w0 + b0 [a0]: attention server 0 (a0) is DEAD; attention server b0 "
        "joined; re-planned over 1 attention server (b0) in attention epoch 1, generation 1 "
        "continues",
        "replan job-2 w1 + c0 [a1]: attention server 0 (a1) is DEAD; attention server c0 "
        "joined; re-planned over 1 attention server (c0) in attention epoch 1, generation 1 "
        "continues"}},
      {"ReplanBeforePlacement",
       {Worker("w0"), Worker("w1"), Server("a0", v1::DEAD), Server("b0")},
       {JobBuilder("job-1", 1).Disaggregated(1).Running({"w0"}, {"a0"}),
        JobBuilder("job-2", 1).Disaggregated(1)},
       {"replan job-1 w0 + b0 [a0]: attention server 0 (a0) is DEAD; attention server b0 "
        "joined; re-planned over 1 attention server (b0) in attention epoch 1, generation 1 "
        "continues",
        "wait job-2: waiting for 1 healthy free attention servers (0 free now)"}},
      // Devices: CUDA jobs on workers serving a GPU only.
      {"CudaJobWaitsOnAClusterWithoutGpus",
       {Worker("w0"), Worker("w1"), Worker("w2"), Server("a0")},
       {JobBuilder("job-1", 2).Cuda()},
       {"wait job-1: waiting for 2 healthy free workers with a CUDA GPU (device: cuda; 0 free "
        "now); 0 of 3 registered workers serve one (start corescape-worker --device=cuda:N)"}},
      {"CudaJobWaitsCountingDeadWorkersOut",
       {Worker("w0"), GpuWorker("g0", 0, v1::DEAD), GpuWorker("g1", 1)},
       {JobBuilder("job-1", 2).Cuda()},
       {"wait job-1: waiting for 2 healthy free workers with a CUDA GPU (device: cuda; 1 free "
        "now); 1 of 2 registered workers serve one"}},
      {"CudaJobTakesOnlyGpuWorkers",
       {Worker("a-cpu"), GpuWorker("g1", 1), GpuWorker("g0", 0), Worker("z-cpu")},
       {JobBuilder("job-1", 2).Cuda()},
       {"assign job-1 g0,g1 accumulation 1"}},
      {"CudaJobWaitsForTheBusyGpuWhileACpuJobRuns",
       {Worker("w0"), GpuWorker("g0")},
       {JobBuilder("job-1", 1).Cuda().Running({"g0"}), JobBuilder("job-2", 1, 1).Cuda(),
        JobBuilder("job-3", 1, 2)},
       {"wait job-2: waiting for 1 healthy free workers with a CUDA GPU (device: cuda; 0 free "
        "now); 1 of 2 registered workers serve one",
        "assign job-3 w0 accumulation 1"}},
      {"CpuJobTakesCpuWorkersFirst",
       {GpuWorker("a-gpu"), Worker("b-cpu"), Worker("c-cpu")},
       {JobBuilder("job-1", 1), JobBuilder("job-2", 2, 1)},
       {"assign job-1 b-cpu accumulation 1", "assign job-2 c-cpu,a-gpu accumulation 1"}},
      {"PinnedCudaJobOnACpuWorkerSaysWhich",
       {Worker("w0"), GpuWorker("g0")},
       {JobBuilder("job-1", 2).Cuda().Pinned({"g0", "w0"})},
       {"wait job-1: waiting for 2 healthy free workers with a CUDA GPU (device: cuda; 1 free "
        "now); 1 of 2 registered workers serve one; pinned w0 serves no CUDA GPU"}},
      // Checkpoint roots: only workers whose root holds the directory.
      {"JobTakesTheWorkerWhoseRootHoldsItsCheckpoints",
       {RootedWorker("w0", "/data/a"), RootedWorker("w1", "/data/b")},
       {JobBuilder("job-1", 1).CheckpointsIn("/data/b/ckpt")},
       {"assign job-1 w1 accumulation 1"}},
      {"JobWaitsNamingItsDirectoryAndTheRoots",
       {RootedWorker("w0", "/data/a"), RootedWorker("w1", "/data/b"),
        RootedWorker("w2", "/data/b")},
       {JobBuilder("job-1", 3).CheckpointsIn("/data/b/ckpt"),
        JobBuilder("job-2", 1, 1).CheckpointsIn("/elsewhere")},
       {"wait job-1: waiting for 3 healthy free workers (3 free now); checkpoint.directory "
        "/data/b/ckpt is outside the checkpoint root of 1 of them (/data/a; corescape-worker "
        "--checkpoint_root)",
        "wait job-2: waiting for 1 healthy free workers (3 free now); checkpoint.directory "
        "/elsewhere is outside the checkpoint root of 3 of them (/data/a, /data/b; "
        "corescape-worker --checkpoint_root)"}},
      {"RootIsComparedByWholeComponents",
       {RootedWorker("w0", "/data/a")},
       {JobBuilder("job-1", 1).CheckpointsIn("/data/ab")},
       {"wait job-1: waiting for 1 healthy free workers (1 free now); checkpoint.directory "
        "/data/ab is outside the checkpoint root of 1 of them (/data/a; corescape-worker "
        "--checkpoint_root)"}},
      {"WorkerThatReportedNoRootDecidesForItself",
       {Worker("w0")},
       {JobBuilder("job-1", 1).CheckpointsIn("/anywhere")},
       {"assign job-1 w0 accumulation 1"}},
      {"RecoveringJobKeepsToTheRoots",
       {RootedWorker("w0", "/data/a"), RootedWorker("w1", "/data/b")},
       {JobBuilder("job-1", 1).CheckpointsIn("/data/b").Recovering(kNow)},
       {"assign job-1 w1 accumulation 1"}},
      {"JobTakesTheWorkerWhoseDataRootHoldsItsDatasets",
       {DataWorker("w0", "/data/a"), DataWorker("w1", "/data/b"), Worker("w2")},
       {JobBuilder("job-1", 2).TrainsOn("/data/b/fortunes")},
       {"assign job-1 w1,w2 accumulation 1"}},
      {"JobWaitsNamingTheDataRoots",
       {DataWorker("w0", "/data/a"), DataWorker("w1", "/data/b")},
       {JobBuilder("job-1", 1).TrainsOn("/etc/shadow"),
        JobBuilder("job-2", 1, 1).TrainsOn("/data/ab/fortunes")},
       {"wait job-1: waiting for 1 healthy free workers (2 free now); its datasets are "
        "outside the data root of 2 of them (/data/a, /data/b; corescape-worker --data_root)",
        "wait job-2: waiting for 1 healthy free workers (2 free now); its datasets are "
        "outside the data root of 2 of them (/data/a, /data/b; corescape-worker --data_root)"}},
      {"DeadWorkerRecoversEvenWithServersLost",
       {Worker("w0", v1::DEAD), Worker("w1"), Server("a0", v1::DEAD), Server("a1")},
       {JobBuilder("job-1", 1).Disaggregated(1).Running({"w0"}, {"a0"})},
       {"recover job-1 RECOVERING: rank 0 (w0) is DEAD; restarting from the start (no "
        "checkpoint yet)",
        "assign job-1 w1 + a1 accumulation 1"}},
  };
}

class PlaceJobsTest : public ::testing::TestWithParam<Case> {};

TEST_P(PlaceJobsTest, Decides) {
  const Case& c = GetParam();
  PlacementSnapshot snapshot{c.nodes, c.jobs, kNow};
  EXPECT_EQ(Describe(PlaceJobs(snapshot, kOptions)), c.want);
}

INSTANTIATE_TEST_SUITE_P(Table, PlaceJobsTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// Submit: refused only when workers are registered and none of their roots
// holds the directory; named with the roots.
TEST(CheckSomeWorkerHoldsCheckpointsTest, RefusesADirectoryOutsideEveryRoot) {
  v1::JobSpec spec;
  spec.mutable_checkpoint()->set_directory("/elsewhere/ckpt");
  EXPECT_TRUE(CheckSomeWorkerHoldsCheckpoints(spec, "/elsewhere/ckpt", {}).ok());
  EXPECT_TRUE(
      CheckSomeWorkerHoldsCheckpoints(spec, "/elsewhere/ckpt", {Server("a0")}).ok());
  const std::vector<v1::NodeInfo> registry = {RootedWorker("w0", "/data/b"),
                                              RootedWorker("w1", "/data/a", v1::DEAD),
                                              RootedWorker("w2", "/data/b"), Server("a0")};
  const absl::Status refused = CheckSomeWorkerHoldsCheckpoints(spec, "/elsewhere/ckpt", registry);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(),
            "spec.checkpoint.directory: /elsewhere/ckpt is outside the checkpoint root of every "
            "registered worker (/data/a, /data/b); choose a directory under one, or start a "
            "worker with --checkpoint_root holding it");
  // Resolved elsewhere than written (a symbolic link): both are named.
  EXPECT_TRUE(absl::StrContains(
      CheckSomeWorkerHoldsCheckpoints(spec, "/resolved/ckpt", registry).message(),
      "/elsewhere/ckpt (/resolved/ckpt) is outside"));
  // A dead worker's root still counts: it may come back.
  EXPECT_TRUE(CheckSomeWorkerHoldsCheckpoints(spec, "/data/a/ckpt", registry).ok());
  // A worker that reported no root may hold anything.
  std::vector<v1::NodeInfo> with_unknown = registry;
  with_unknown.push_back(Worker("w3"));
  EXPECT_TRUE(CheckSomeWorkerHoldsCheckpoints(spec, "/elsewhere/ckpt", with_unknown).ok());
}

// Submit: datasets outside every registered worker's data root are refused,
// compared as written, in words that do not depend on what exists.
TEST(CheckSomeWorkerHoldsDatasetsTest, RefusesADatasetOutsideEveryRoot) {
  v1::JobSpec spec;
  spec.mutable_data()->add_train_shards("/srv/data/fortunes");
  spec.mutable_data()->add_validation_shards("/srv/data/fortunes");
  EXPECT_TRUE(CheckSomeWorkerHoldsDatasets(spec, {}).ok());
  EXPECT_TRUE(CheckSomeWorkerHoldsDatasets(spec, {Server("a0")}).ok());
  const std::vector<v1::NodeInfo> registry = {DataWorker("w0", "/srv/data"),
                                              DataWorker("w1", "/data/b", v1::DEAD),
                                              Server("a0")};
  EXPECT_TRUE(CheckSomeWorkerHoldsDatasets(spec, registry).ok());
  for (const char* elsewhere :
       {"/etc/shadow", "/etc/no-such-file", "/dev/zero", "/proc/self/mem", "/srv/database"}) {
    spec.mutable_data()->set_validation_shards(0, elsewhere);
    const absl::Status refused = CheckSomeWorkerHoldsDatasets(spec, registry);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.message(),
              absl::StrCat("spec.data.validation_shards[0]: ", elsewhere,
                           " is outside the data root of every registered worker (/data/b, "
                           "/srv/data); choose a dataset under one, or start a worker with "
                           "--data_root holding it"));
  }
  // Each dataset under some root, but no one root holding both.
  spec.mutable_data()->set_validation_shards(0, "/data/b/validation");
  EXPECT_EQ(CheckSomeWorkerHoldsDatasets(spec, registry).message(),
            "spec.data: no registered worker's data root holds all of the job's datasets "
            "(/data/b, /srv/data); choose a dataset under one, or start a worker with "
            "--data_root holding it");
  // A worker that reported no root may hold anything.
  std::vector<v1::NodeInfo> with_unknown = registry;
  with_unknown.push_back(Worker("w3"));
  EXPECT_TRUE(CheckSomeWorkerHoldsDatasets(spec, with_unknown).ok());
}

// Random clusters and queues: whatever PlaceJobs decides, no node ends up
// in two jobs, placements are on ALIVE nodes of the right role and the
// gang's size, the input order of the jobs does not matter, and no waiting
// job is left waiting while the nodes still free at the end would start it.
TEST(PlaceJobsRandomTest, InvariantsHold) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const v1::NodeState states[] = {v1::ALIVE, v1::ALIVE, v1::ALIVE, v1::DRAINING, v1::DEAD,
                                  v1::DEREGISTERED};
  for (int trial = 0; trial < 3000; ++trial) {
    PlacementSnapshot snapshot;
    snapshot.now = kNow;
    std::vector<std::string> worker_pool, server_pool;
    for (int i = 0; i < 6; ++i) worker_pool.push_back(absl::StrCat("w", i));
    for (int i = 0; i < 4; ++i) server_pool.push_back(absl::StrCat("a", i));
    for (const auto* pool : {&worker_pool, &server_pool}) {
      for (const std::string& name : *pool) {
        if (pick(8) == 0) continue;  // not in the registry
        v1::NodeInfo node = Node(name, pool == &worker_pool ? v1::WORKER : v1::ATTENTION_SERVER,
                                 states[pick(6)], 1 + (pick(6) == 0));
        if (pool == &worker_pool && pick(3) == 0) {
          node.mutable_resources()->mutable_device()->set_kind(v1::CUDA);
        }
        snapshot.nodes.push_back(node);
      }
    }
    std::shuffle(worker_pool.begin(), worker_pool.end(), rng);
    std::shuffle(server_pool.begin(), server_pool.end(), rng);
    const int job_count = pick(5);
    for (int j = 0; j < job_count; ++j) {
      const int workers = 1 + pick(3);
      JobBuilder job(absl::StrCat("job-", j + 1), workers, /*submitted_s=*/pick(3));
      const int servers = pick(3) == 0 ? 1 + pick(2) : 0;
      if (servers > 0) job.Disaggregated(servers);
      if (pick(3) == 0) job.Cuda();
      if (pick(3) == 0) job.Elastic(1 + pick(workers), 1 + pick(2));
      if (pick(6) == 0) {
        std::vector<std::string> pinned(worker_pool.begin(), worker_pool.begin() + workers);
        job.Pinned(pinned);
      }
      switch (pick(3)) {
        case 0:
          break;  // PENDING
        case 1: {
          const int held_servers = servers > 0 ? 1 + pick(servers) : 0;
          if (static_cast<int>(worker_pool.size()) < workers ||
              static_cast<int>(server_pool.size()) < held_servers) {
            break;
          }
          std::vector<std::string> w(worker_pool.end() - workers, worker_pool.end());
          std::vector<std::string> s(server_pool.end() - held_servers, server_pool.end());
          worker_pool.resize(worker_pool.size() - workers);
          server_pool.resize(server_pool.size() - held_servers);
          job.Running(w, s).Recoveries(pick(7));
          break;
        }
        default:
          job.Recovering(kNow - absl::Seconds(pick(10)));
      }
      snapshot.jobs.push_back(job);
    }
    SCOPED_TRACE(absl::StrCat("trial ", trial));
    const std::vector<PlacementDecision> decisions = PlaceJobs(snapshot, kOptions);

    PlacementSnapshot shuffled = snapshot;
    std::shuffle(shuffled.jobs.begin(), shuffled.jobs.end(), rng);
    ASSERT_EQ(Describe(PlaceJobs(shuffled, kOptions)), Describe(decisions));

    std::map<std::string, v1::NodeInfo> nodes;
    for (const v1::NodeInfo& node : snapshot.nodes) nodes[node.name()] = node;
    auto alive_with_role = [&](const std::vector<v1::NodeInfo>& group, v1::NodeRole role) {
      for (const v1::NodeInfo& node : group) {
        auto it = nodes.find(node.name());
        if (it == nodes.end() || it->second.state() != v1::ALIVE || it->second.role() != role) {
          return false;
        }
      }
      return true;
    };
    // Who holds which node once the decisions are applied.
    std::map<std::string, std::vector<std::string>> occupied;  // job → nodes
    std::set<std::string> assigned, recovered, requeued;
    for (const PlacementJob& job : snapshot.jobs) {
      if (job.job.state() != v1::RUNNING) continue;
      occupied[job.job.job_id()].assign(job.job.assigned_nodes().begin(),
                                        job.job.assigned_nodes().end());
    }
    for (const PlacementDecision& decision : decisions) {
      if (const auto* d = std::get_if<RecoverJob>(&decision)) {
        ASSERT_TRUE(recovered.insert(d->job_id).second);
        if (d->recovery.state == v1::RECOVERING) requeued.insert(d->job_id);
        occupied.erase(d->job_id);
      } else if (const auto* d = std::get_if<ReplanAttention>(&decision)) {
        ASSERT_TRUE(alive_with_role(d->servers, v1::ATTENTION_SERVER));
        ASSERT_FALSE(d->servers.empty());
        std::vector<std::string>& held = occupied[d->job_id];
        held.clear();
        for (const auto* group : {&d->workers, &d->servers}) {
          for (const v1::NodeInfo& node : *group) held.push_back(node.name());
        }
      } else if (const auto* d = std::get_if<AssignJob>(&decision)) {
        ASSERT_TRUE(assigned.insert(d->job_id).second);
        ASSERT_TRUE(alive_with_role(d->workers, v1::WORKER));
        ASSERT_TRUE(alive_with_role(d->servers, v1::ATTENTION_SERVER));
        const PlacementJob& job = *std::find_if(
            snapshot.jobs.begin(), snapshot.jobs.end(),
            [&](const PlacementJob& j) { return j.job.job_id() == d->job_id; });
        const v1::JobSpec& spec = job.job.spec();
        if (spec.device() == v1::CUDA) {
          for (const v1::NodeInfo& worker : d->workers) {
            ASSERT_EQ(nodes.at(worker.name()).resources().device().kind(), v1::CUDA)
                << d->job_id << " placed on " << worker.name() << " without a GPU";
          }
        }
        const int wanted = spec.placement().workers();
        const int world = static_cast<int>(d->workers.size());
        ASSERT_GE(world, spec.placement().min_workers());
        ASSERT_LE(world, wanted);
        ASSERT_EQ(int64_t{world} * d->gradient_accumulation,
                  int64_t{wanted} * spec.data().gradient_accumulation());
        ASSERT_EQ(static_cast<int>(d->servers.size()),
                  spec.attention().mode() == v1::DISAGGREGATED
                      ? spec.attention().attention_servers()
                      : 0);
        std::vector<std::string>& held = occupied[d->job_id];
        for (const auto* group : {&d->workers, &d->servers}) {
          for (const v1::NodeInfo& node : *group) held.push_back(node.name());
        }
      }
    }
    std::set<std::string> busy;
    for (const auto& [job, held] : occupied) {
      for (const std::string& name : held) {
        auto it = nodes.find(name);
        if (it == nodes.end() || it->second.state() == v1::DEAD ||
            it->second.state() == v1::DEREGISTERED) {
          continue;
        }
        ASSERT_TRUE(busy.insert(name).second) << name << " is in two jobs";
      }
    }
    // Work conservation: a waiting job that was not placed does not fit in
    // what is still free.
    int free_workers = 0, free_gpu_workers = 0, free_servers = 0;
    std::set<std::string> free_names;
    for (const auto& [name, node] : nodes) {
      if (node.state() != v1::ALIVE || busy.count(name)) continue;
      free_names.insert(name);
      if (node.role() == v1::WORKER && node.resources().device().kind() == v1::CUDA) {
        ++free_gpu_workers;
      }
      (node.role() == v1::WORKER ? free_workers : free_servers) += 1;
    }
    for (const PlacementJob& job : snapshot.jobs) {
      const std::string& id = job.job.job_id();
      const bool waiting = job.job.state() == v1::PENDING || job.job.state() == v1::RECOVERING ||
                           requeued.count(id);
      if (!waiting || assigned.count(id)) continue;
      const v1::JobSpec& spec = job.job.spec();
      const int servers_wanted = spec.attention().mode() == v1::DISAGGREGATED
                                     ? spec.attention().attention_servers()
                                     : 0;
      if (free_servers < servers_wanted) continue;
      const bool cuda = spec.device() == v1::CUDA;
      if (!spec.placement().node_names().empty()) {
        EXPECT_FALSE(std::all_of(spec.placement().node_names().begin(),
                                 spec.placement().node_names().end(),
                                 [&](const std::string& n) {
                                   return free_names.count(n) > 0 &&
                                          (!cuda || nodes.at(n).resources().device().kind() ==
                                                        v1::CUDA);
                                 }))
            << id << " waits with its pinned nodes free";
        continue;
      }
      EXPECT_LT(cuda ? free_gpu_workers : free_workers, spec.placement().workers())
          << id << " waits with room for it";
    }
  }
}

}  // namespace
}  // namespace corescape::scheduler
