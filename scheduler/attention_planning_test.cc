#include "scheduler/attention_planning.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/attention/micro_batch_plan.h"
#include "runtime/base/clock.h"

namespace corescape::scheduler {
namespace {

using ::testing::HasSubstr;

// Jobs and nodes as JobManager and NodeRegistry would answer.
class FakeCluster {
 public:
  // A RUNNING DISAGGREGATED job on workers w0.. and servers a0.. (incarnation 1).
  v1::Job& AddJob(const std::string& id, int workers, int servers, double tolerance = 0.05) {
    v1::Job& job = jobs_[id];
    job.set_job_id(id);
    job.set_state(v1::RUNNING);
    job.set_generation(1);
    v1::JobSpec& spec = *job.mutable_spec();
    spec.mutable_model()->set_preset("tiny");
    spec.set_steps(100);
    spec.mutable_attention()->set_mode(v1::DISAGGREGATED);
    spec.mutable_attention()->set_attention_servers(servers);
    spec.mutable_attention()->set_tolerance(tolerance);
    for (int w = 0; w < workers; ++w) AddNode(absl::StrCat("w", w), v1::WORKER, job);
    for (int s = 0; s < servers; ++s) AddNode(absl::StrCat("a", s), v1::ATTENTION_SERVER, job);
    return job;
  }
  v1::Job& job(const std::string& id) { return jobs_.at(id); }
  v1::NodeInfo& node(const std::string& name) { return nodes_.at(name); }

  AttentionPlanning::JobLookup JobLookup() {
    return [this](const std::string& id) -> absl::StatusOr<v1::Job> {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job '", id, "'"));
      return it->second;
    };
  }
  AttentionPlanning::NodeLookup NodeLookup() {
    return [this](const std::string& name) -> absl::StatusOr<v1::NodeInfo> {
      auto it = nodes_.find(name);
      if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("no node '", name, "'"));
      return it->second;
    };
  }

 private:
  void AddNode(const std::string& name, v1::NodeRole role, v1::Job& job) {
    v1::NodeInfo& node = nodes_[name];
    node.set_name(name);
    node.set_role(role);
    node.set_state(v1::ALIVE);
    node.set_incarnation(1);
    node.set_data_address(absl::StrCat("127.0.0.1:", 9000 + nodes_.size()));
    job.add_assigned_nodes(name);
    job.add_assigned_incarnations(1);
  }

  std::map<std::string, v1::Job> jobs_;
  std::map<std::string, v1::NodeInfo> nodes_;
};

// A bad message, the node that sends it, and how it must be refused.
template <typename Message>
struct RefusalCase {
  std::string what;
  Message message;
  std::string node;
  absl::StatusCode code;
  std::string field;  // what the refusal's message must name
};

// Expects `send` (node, message) to refuse every case with its code, naming its field.
template <typename Message, typename Send>
void ExpectRefused(const std::vector<RefusalCase<Message>>& cases, Send send) {
  for (const RefusalCase<Message>& c : cases) {
    absl::Status status = send(c.node, c.message);
    EXPECT_EQ(status.code(), c.code) << c.what << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field)) << c.what;
  }
}

class AttentionPlanningTest : public ::testing::Test {
 protected:
  AttentionPlanningTest()
      : planning_(cluster_.JobLookup(), cluster_.NodeLookup(), &clock_, {},
                  [this](const std::string& node, uint64_t incarnation,
                         const v1::SchedulerCommand& command) {
                    pushed_.push_back({node, incarnation, command});
                    return push_result_;
                  }) {}

  struct Pushed {
    std::string node;
    uint64_t incarnation;
    v1::SchedulerCommand command;
  };
  // What went to node sessions with that body, in order.
  std::vector<Pushed> Pushes(v1::SchedulerCommand::BodyCase body) const {
    std::vector<Pushed> out;
    for (const Pushed& p : pushed_) {
      if (p.command.body_case() == body) out.push_back(p);
    }
    return out;
  }
  std::vector<Pushed> StepPlans() const {
    return Pushes(v1::SchedulerCommand::kAttentionStepPlan);
  }

  // A worker's demand: the document lengths of each of the step's
  // micro-batches, in the job's current generation and attention epoch.
  v1::AttentionDemand MicroBatchDemand(const std::string& job_id, int rank, int64_t step,
                                       const std::vector<std::vector<int64_t>>& micro_batches) {
    v1::AttentionDemand demand;
    demand.set_job_id(job_id);
    demand.set_generation(cluster_.job(job_id).generation());
    demand.set_attention_epoch(cluster_.job(job_id).attention_epoch());
    demand.set_rank(rank);
    demand.set_step(step);
    for (const auto& lengths : micro_batches) {
      v1::AttentionMicroBatch* micro_batch = demand.add_micro_batches();
      for (int64_t length : lengths) micro_batch->add_document_lengths(length);
    }
    return demand;
  }
  // The same with one micro-batch.
  v1::AttentionDemand Demand(const std::string& job_id, int rank, int64_t step,
                             const std::vector<int64_t>& lengths) {
    return MicroBatchDemand(job_id, rank, step, {lengths});
  }
  absl::Status Send(const v1::AttentionDemand& demand) {
    return planning_.OnAttentionDemand(absl::StrCat("w", demand.rank()),
                                       cluster_.job(demand.job_id())
                                           .assigned_incarnations(demand.rank()),
                                       demand);
  }
  absl::Status Report(const std::string& job_id, int rank, int64_t step,
                      const std::vector<int64_t>& lengths) {
    return Send(Demand(job_id, rank, step, lengths));
  }
  // Every worker of the job reports one micro-batch of documents for `step`.
  void ReportAll(const std::string& job_id, int64_t step,
                 const std::vector<std::vector<int64_t>>& documents) {
    for (size_t w = 0; w < documents.size(); ++w) {
      ASSERT_TRUE(Report(job_id, static_cast<int>(w), step, documents[w]).ok());
    }
  }
  // Every worker reports its micro-batches: [rank][micro-batch][document].
  void ReportAllMicroBatches(const std::string& job_id, int64_t step,
                             const std::vector<std::vector<std::vector<int64_t>>>& documents) {
    for (size_t w = 0; w < documents.size(); ++w) {
      absl::Status s = Send(MicroBatchDemand(job_id, static_cast<int>(w), step, documents[w]));
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  v1::AttentionTaskTiming Timing(const std::string& job_id, double cost, double seconds) {
    v1::AttentionTaskTiming timing;
    timing.set_job_id(job_id);
    timing.set_generation(cluster_.job(job_id).generation());
    timing.set_cost_units(cost);
    timing.set_seconds(seconds);
    return timing;
  }

  FakeCluster cluster_;
  FakeClock clock_;
  std::vector<Pushed> pushed_;  // what went to node sessions
  absl::Status push_result_;    // what the sessions answer
  AttentionPlanning planning_;
};

std::vector<std::vector<int64_t>> RandomDocuments(int workers, std::mt19937& rng) {
  std::uniform_int_distribution<int> count(1, 12);
  std::lognormal_distribution<double> length(4.0, 1.0);
  std::vector<std::vector<int64_t>> documents(workers);
  for (auto& docs : documents) {
    for (int d = count(rng); d > 0; --d) {
      docs.push_back(std::max<int64_t>(1, std::llround(length(rng))));
    }
  }
  return documents;
}

TEST(AttentionModelShapeTest, PresetWithOverrides) {
  v1::JobSpec spec;
  spec.mutable_model()->set_preset("tiny");
  auto shape = AttentionModelShape(spec);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->n_heads, 4);
  EXPECT_EQ(shape->n_kv_heads, 2);
  EXPECT_EQ(shape->head_dim, 24);  // tiny: d_model 96
  EXPECT_EQ(shape->hidden, 96);
  EXPECT_EQ(shape->bytes_per_element, 4);
  spec.mutable_model()->set_d_model(128);
  spec.mutable_model()->set_n_heads(8);
  spec.mutable_model()->set_n_kv_heads(8);
  shape = AttentionModelShape(spec);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->n_heads, 8);
  EXPECT_EQ(shape->n_kv_heads, 8);
  EXPECT_EQ(shape->head_dim, 16);
}

// With no timings every weight is 1: the scheduler's plan must be exactly
// the one every participant computes locally.
TEST_F(AttentionPlanningTest, PlansMatchTheRuntimePlanner) {
  std::mt19937 rng(7);
  int job_number = 0;
  for (auto [workers, servers] : {std::pair{1, 1}, {2, 2}, {2, 3}, {3, 4}, {4, 2}}) {
    for (int trial = 0; trial < 5; ++trial) {
      const std::string id = absl::StrCat("job-", ++job_number);
      cluster_.AddJob(id, workers, servers, /*tolerance=*/trial % 2 ? 0.0 : 0.05);
      const auto documents = RandomDocuments(workers, rng);
      ReportAll(id, 1, documents);
      auto plan = planning_.LatestPlan(id);
      ASSERT_TRUE(plan.ok()) << plan.status();

      // The tiny preset as the workers' Transformer::attention_shape() gives it.
      kernels::AttentionShape shape{4, 2, 24, 1.0f / std::sqrt(24.0f)};
      attention::PlanOptions options;
      options.servers = servers;
      options.tolerance = cluster_.job(id).spec().attention().tolerance();
      auto expected = attention::PlanMicroBatch(documents, shape, options);
      ASSERT_TRUE(expected.ok()) << expected.status();

      const std::string where = absl::StrCat(workers, " workers, ", servers, " servers, trial ",
                                             trial);
      ASSERT_EQ(plan->tasks_size(), static_cast<int>(expected->plan.tasks.size())) << where;
      for (int t = 0; t < plan->tasks_size(); ++t) {
        const planner::PlannedTask& e = expected->plan.tasks[t];
        const v1::AttentionTask& got = plan->tasks(t);
        EXPECT_EQ(got.worker_rank(), e.worker) << where << " task " << t;
        EXPECT_EQ(got.document(), e.document) << where << " task " << t;
        EXPECT_EQ(got.q_begin(), e.q_begin) << where << " task " << t;
        EXPECT_EQ(got.q_end(), e.q_end) << where << " task " << t;
        EXPECT_EQ(got.server(), e.server) << where << " task " << t;
      }
      ASSERT_EQ(plan->server_cost_size(), servers) << where;
      for (int s = 0; s < servers; ++s) {
        EXPECT_DOUBLE_EQ(plan->server_cost(s), expected->plan.servers[s].flops) << where;
        EXPECT_EQ(plan->server_tasks(s), expected->plan.servers[s].tasks) << where;
        EXPECT_EQ(plan->server_bytes_received(s), expected->plan.servers[s].bytes_received);
        EXPECT_DOUBLE_EQ(plan->server_speed_weights(s), 1.0) << where;
        EXPECT_EQ(plan->server_names(s), absl::StrCat("a", s)) << where;
        EXPECT_EQ(plan->server_measured_speed(s), 0.0) << where;
      }
      EXPECT_EQ(plan->bytes_moved(), expected->plan.bytes_moved) << where;
      EXPECT_DOUBLE_EQ(plan->imbalance(), expected->plan.imbalance) << where;
      // Pieces are whole query rows: at tolerance 0 a few pairs over.
      EXPECT_LE(plan->imbalance(), 1 + plan->tolerance() + 1e-3) << where;
      EXPECT_EQ(plan->step(), 1);
      EXPECT_EQ(plan->generation(), 1u);
      ASSERT_EQ(plan->worker_tokens_size(), workers);
      for (int w = 0; w < workers; ++w) {
        int64_t tokens = 0;
        for (int64_t length : documents[w]) tokens += length;
        EXPECT_EQ(plan->worker_tokens(w), tokens);
      }
    }
  }
}

TEST_F(AttentionPlanningTest, PlansOnlyOnceEveryWorkerReported) {
  cluster_.AddJob("job-1", 3, 2);
  EXPECT_TRUE(Report("job-1", 0, 1, {100, 50}).ok());
  EXPECT_TRUE(Report("job-1", 2, 1, {80}).ok());
  auto plan = planning_.LatestPlan("job-1");
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("no planned step yet"));
  EXPECT_TRUE(Report("job-1", 1, 1, {}).ok());  // a worker may have no documents
  plan = planning_.LatestPlan("job-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->step(), 1);
  EXPECT_EQ(plan->worker_tokens(1), 0);
  EXPECT_EQ(plan->worker_tokens(2), 80);

  // Step 2 complete before step 3's stragglers: the newest complete wins.
  ReportAll("job-1", 2, {{10}, {20}, {30}});
  ASSERT_TRUE(Report("job-1", 0, 3, {5}).ok());
  plan = planning_.LatestPlan("job-1");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->step(), 2);
  // A report for a step older than the one planned is refused.
  absl::Status late = Report("job-1", 0, 1, {10});
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(late.message()), HasSubstr("attention_demand.step"));
  // The planned step again (redone after an attention failover): planned anew.
  cluster_.node("a1").set_state(v1::DEAD);
  ReportAll("job-1", 2, {{10}, {20}, {30}});
  plan = planning_.LatestPlan("job-1");
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->step(), 2);
  EXPECT_EQ(plan->server_names_size(), 1);
}

TEST_F(AttentionPlanningTest, NewGenerationDropsHalfReportedSteps) {
  cluster_.AddJob("job-1", 2, 1);
  ASSERT_TRUE(Report("job-1", 0, 5, {64}).ok());
  cluster_.job("job-1").set_generation(2);  // recovered from a checkpoint
  ASSERT_TRUE(Report("job-1", 1, 5, {64}).ok());
  EXPECT_FALSE(planning_.LatestPlan("job-1").ok()) << "rank 0's report was of generation 1";
  ASSERT_TRUE(Report("job-1", 0, 5, {64}).ok());
  auto plan = planning_.LatestPlan("job-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->generation(), 2u);
}

TEST(ServerSpeedEstimatesTest, WeightedAveragesPerIncarnation) {
  ServerSpeedEstimates speeds(0.5);
  EXPECT_FALSE(speeds.Speed("a0", 1).has_value());
  speeds.Record("a0", 1, 100, 1);  // 100/s
  EXPECT_DOUBLE_EQ(*speeds.Speed("a0", 1), 100);
  speeds.Record("a0", 1, 300, 1);  // averages: cost 200, seconds 1
  EXPECT_DOUBLE_EQ(*speeds.Speed("a0", 1), 200);
  // A big batch counts more than a small one: (0.5*1000 + 0.5*200) / (0.5*20 + 0.5*1).
  speeds.Record("a0", 1, 1000, 20);
  EXPECT_NEAR(*speeds.Speed("a0", 1), 600.0 / 10.5, 1e-9);
  EXPECT_EQ(speeds.Reports("a0", 1), 3);
  EXPECT_FALSE(speeds.Speed("a0", 2).has_value()) << "a restart is a new server";
  speeds.Record("a0", 2, 50, 1);
  EXPECT_DOUBLE_EQ(*speeds.Speed("a0", 2), 50);
  EXPECT_EQ(speeds.Reports("a0", 2), 1);
}

TEST(ServerSpeedEstimatesTest, NormalisedWeights) {
  EXPECT_EQ(NormalisedSpeedWeights({std::nullopt, std::nullopt}),
            (std::vector<double>{1.0, 1.0}));
  std::vector<double> w = NormalisedSpeedWeights({300.0, 100.0});
  EXPECT_DOUBLE_EQ(w[0], 1.5);
  EXPECT_DOUBLE_EQ(w[1], 0.5);
  // The unmeasured server counts as the measured mean (200).
  w = NormalisedSpeedWeights({300.0, 100.0, std::nullopt});
  EXPECT_NEAR(w[0], 1.5, 1e-12);
  EXPECT_NEAR(w[1], 0.5, 1e-12);
  EXPECT_NEAR(w[2], 1.0, 1e-12);
  // One absurd measurement cannot starve a server.
  w = NormalisedSpeedWeights({1.0, 1e6, 1e6});
  EXPECT_GT(w[0], 0.9 / kMaxSpeedWeight);
  EXPECT_NEAR((w[0] + w[1] + w[2]) / 3, 1.0, 1e-12);
}

TEST_F(AttentionPlanningTest, SlowServerGetsLessCost) {
  cluster_.AddJob("job-1", 2, 2);
  // a1 needs twice a0's time for the same work.
  ASSERT_TRUE(planning_.OnAttentionTiming("a0", 1, Timing("job-1", 4e9, 1.0)).ok());
  ASSERT_TRUE(planning_.OnAttentionTiming("a1", 1, Timing("job-1", 4e9, 2.0)).ok());
  ReportAll("job-1", 1, {{200, 150, 90, 60, 30, 12}, {180, 120, 100, 40, 20, 8}});
  auto plan = planning_.LatestPlan("job-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NEAR(plan->server_speed_weights(0), 4.0 / 3, 1e-12);
  EXPECT_NEAR(plan->server_speed_weights(1), 2.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(plan->server_measured_speed(0), 4e9);
  EXPECT_DOUBLE_EQ(plan->server_measured_speed(1), 2e9);
  const double ratio = plan->server_cost(1) / plan->server_cost(0);
  EXPECT_GT(ratio, 0.40) << "within the tolerance of half";
  EXPECT_LT(ratio, 0.56) << "the slow server must get about half the fast one's cost";
  EXPECT_LE(plan->imbalance(), 1.05 + 1e-9) << "balanced in time, not in cost";
}

TEST_F(AttentionPlanningTest, RebalanceRederivesWeightsFromNewTimings) {
  cluster_.AddJob("job-1", 2, 2);
  cluster_.AddJob("job-2", 1, 1);
  cluster_.job("job-2").set_state(v1::SUCCEEDED);
  ReportAll("job-1", 1, {{200, 150, 90, 60}, {180, 120, 100, 40}});
  ReportAll("job-2", 1, {{64}});
  auto before = planning_.LatestPlan("job-1");
  ASSERT_TRUE(before.ok());
  EXPECT_DOUBLE_EQ(before->server_speed_weights(1), 1.0);

  ASSERT_TRUE(planning_.OnAttentionTiming("a0", 1, Timing("job-1", 1e9, 1.0)).ok());
  ASSERT_TRUE(planning_.OnAttentionTiming("a1", 1, Timing("job-1", 1e9, 3.0)).ok());
  // Timings alone do not change the kept plan; a rebalance does.
  EXPECT_DOUBLE_EQ(planning_.LatestPlan("job-1")->server_speed_weights(1), 1.0);
  clock_.Advance(absl::Seconds(1));
  auto plans = planning_.Rebalance("job-1");
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 1u);
  const v1::AttentionPlan& after = (*plans)[0];
  EXPECT_EQ(after.step(), 1);
  EXPECT_NEAR(after.server_speed_weights(1), 0.5, 1e-12);
  EXPECT_LT(after.server_cost(1), before->server_cost(1));
  EXPECT_GT(after.planned_unix_ms(), before->planned_unix_ms());
  EXPECT_NEAR(planning_.LatestPlan("job-1")->server_speed_weights(1), 0.5, 1e-12);

  // All jobs: only RUNNING ones with a demand.
  plans = planning_.Rebalance("");
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(plans->size(), 1u);
  EXPECT_EQ((*plans)[0].job_id(), "job-1");
}

TEST_F(AttentionPlanningTest, DeadAndDrainedServersAreLeftOut) {
  cluster_.AddJob("job-1", 2, 3);
  ASSERT_TRUE(planning_.OnAttentionTiming("a0", 1, Timing("job-1", 1e9, 1.0)).ok());
  ASSERT_TRUE(planning_.OnAttentionTiming("a1", 1, Timing("job-1", 1e9, 10.0)).ok());
  cluster_.node("a1").set_state(v1::DRAINING);
  cluster_.node("a2").set_state(v1::DEAD);
  ReportAll("job-1", 1, {{100, 60, 30}, {90, 50}});
  auto plan = planning_.LatestPlan("job-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->server_names_size(), 1);
  EXPECT_EQ(plan->server_names(0), "a0");
  EXPECT_EQ(plan->attention_server_addresses(0), cluster_.node("a0").data_address());
  EXPECT_DOUBLE_EQ(plan->server_speed_weights(0), 1.0) << "normalised over a0 alone";
  EXPECT_EQ(plan->excluded_servers(0), "a1 (DRAINING)");
  EXPECT_EQ(plan->excluded_servers(1), "a2 (DEAD)");
  for (const v1::AttentionTask& task : plan->tasks()) EXPECT_EQ(task.server(), 0);

  // Back from draining: a1 is planned again, with its learned (slow) speed.
  cluster_.node("a1").set_state(v1::ALIVE);
  auto replanned = planning_.Replan("job-1");
  ASSERT_TRUE(replanned.ok()) << replanned.status();
  ASSERT_EQ(replanned->server_names_size(), 2);
  EXPECT_EQ(replanned->server_names(1), "a1");
  EXPECT_LT(replanned->server_speed_weights(1), replanned->server_speed_weights(0));
  EXPECT_GT(replanned->server_cost(1), 0);

  // A restarted server is another process: left out too.
  cluster_.node("a1").set_incarnation(2);
  cluster_.node("a0").set_state(v1::DEREGISTERED);
  auto none = planning_.Replan("job-1");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("no ALIVE attention server"));
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("a1 (restarted)"));
}

// After a failover the job keeps its generation but has fewer servers
// than its spec asks for (attention_failover.h).
TEST_F(AttentionPlanningTest, PlansOverTheServersOfTheCurrentAttentionEpoch) {
  v1::Job& job = cluster_.AddJob("job-1", 2, 2);
  job.mutable_assigned_nodes()->erase(job.mutable_assigned_nodes()->begin() + 2);  // a0 lost
  job.mutable_assigned_incarnations()->RemoveLast();
  job.set_assigned_attention_servers(1);
  EXPECT_EQ(JobWorkerCount(job), 2);
  EXPECT_EQ(planning_.OnAttentionTiming("a0", 1, Timing("job-1", 1e9, 1)).code(),
            absl::StatusCode::kPermissionDenied);
  ReportAll("job-1", 1, {{40, 30}, {50}});
  auto plan = planning_.LatestPlan("job-1");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->server_names_size(), 1);
  EXPECT_EQ(plan->server_names(0), "a1");
  EXPECT_EQ(plan->worker_tokens_size(), 2);
}

TEST_F(AttentionPlanningTest, PlanQueriesNameTheProblem) {
  cluster_.AddJob("job-1", 2, 1);
  cluster_.AddJob("job-2", 1, 0).mutable_spec()->mutable_attention()->set_mode(v1::COLOCATED);

  auto unknown = planning_.LatestPlan("job-9");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("job-9"));
  auto colocated = planning_.LatestPlan("job-2");
  EXPECT_EQ(colocated.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(colocated.status().message()), HasSubstr("COLOCATED"));
  auto unplanned = planning_.LatestPlan("job-1");
  EXPECT_EQ(unplanned.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(unplanned.status().message()), HasSubstr("job-1"));
  auto rebalance = planning_.Rebalance("job-1");
  EXPECT_EQ(rebalance.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(planning_.Rebalance("job-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(planning_.LatestPlan("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AttentionPlanningTest, BadDemandsAreRefusedNamingTheField) {
  cluster_.AddJob("job-1", 2, 1);
  cluster_.AddJob("job-2", 1, 0).mutable_spec()->mutable_attention()->set_mode(v1::COLOCATED);
  std::vector<RefusalCase<v1::AttentionDemand>> cases;
  auto add = [&](std::string what, auto edit, absl::StatusCode code, std::string field,
                 std::string node = "w0") {
    v1::AttentionDemand demand = Demand("job-1", 0, 1, {10, 20});
    edit(demand);
    cases.push_back({what, demand, node, code, field});
  };
  add("no job id", [](auto& d) { d.clear_job_id(); }, absl::StatusCode::kInvalidArgument,
      "attention_demand.job_id");
  add("unknown job", [](auto& d) { d.set_job_id("job-9"); }, absl::StatusCode::kNotFound,
      "attention_demand.job_id");
  add("colocated job", [](auto& d) { d.set_job_id("job-2"); },
      absl::StatusCode::kFailedPrecondition, "attention_demand.job_id");
  add("old generation", [](auto& d) { d.set_generation(0); },
      absl::StatusCode::kFailedPrecondition, "attention_demand.generation");
  add("rank of a server", [](auto& d) { d.set_rank(2); }, absl::StatusCode::kInvalidArgument,
      "attention_demand.rank");
  add("negative rank", [](auto& d) { d.set_rank(-1); }, absl::StatusCode::kInvalidArgument,
      "attention_demand.rank");
  add("someone else's rank", [](auto& d) { d.set_rank(1); },
      absl::StatusCode::kPermissionDenied, "attention_demand.rank");
  add("a server pretending", [](auto&) {}, absl::StatusCode::kPermissionDenied,
      "attention_demand.rank", "a0");
  add("step 0", [](auto& d) { d.set_step(0); }, absl::StatusCode::kInvalidArgument,
      "attention_demand.step");
  add("step past the end", [](auto& d) { d.set_step(101); }, absl::StatusCode::kInvalidArgument,
      "attention_demand.step");
  add("empty document", [](auto& d) { d.mutable_micro_batches(0)->set_document_lengths(1, 0); },
      absl::StatusCode::kInvalidArgument, "attention_demand.micro_batches[0].document_lengths[1]");
  add("huge document",
      [](auto& d) { d.mutable_micro_batches(0)->set_document_lengths(0, int64_t{1} << 40); },
      absl::StatusCode::kInvalidArgument, "attention_demand.micro_batches[0].document_lengths[0]");
  add("empty document in the second micro-batch",
      [](auto& d) {
        v1::AttentionMicroBatch* second = d.add_micro_batches();
        second->add_document_lengths(7);
        second->add_document_lengths(-3);
      },
      absl::StatusCode::kInvalidArgument, "attention_demand.micro_batches[1].document_lengths[1]");
  add("no micro-batches", [](auto& d) { d.clear_micro_batches(); },
      absl::StatusCode::kInvalidArgument, "attention_demand.micro_batches");
  add("too many micro-batches",
      [](auto& d) {
        for (int i = 0; i < 4096; ++i) d.add_micro_batches()->add_document_lengths(1);
      },
      absl::StatusCode::kInvalidArgument, "attention_demand.micro_batches");
  add("too many documents in all",
      [](auto& d) {
        v1::AttentionMicroBatch* second = d.add_micro_batches();
        for (int i = 0; i < (1 << 20) - 1; ++i) second->add_document_lengths(1);
      },
      absl::StatusCode::kInvalidArgument, "documents in all");
  ExpectRefused(cases, [&](const std::string& node, const v1::AttentionDemand& demand) {
    return planning_.OnAttentionDemand(node, 1, demand);
  });
  // None of them counted: rank 1 alone does not complete step 1.
  ASSERT_TRUE(Report("job-1", 1, 1, {5}).ok());
  EXPECT_FALSE(planning_.LatestPlan("job-1").ok());
}

TEST_F(AttentionPlanningTest, BadTimingsAreRefusedNamingTheField) {
  cluster_.AddJob("job-1", 2, 1);
  std::vector<RefusalCase<v1::AttentionTaskTiming>> cases;
  auto add = [&](std::string what, auto edit, absl::StatusCode code, std::string field,
                 std::string node = "a0") {
    v1::AttentionTaskTiming timing = Timing("job-1", 1e9, 1.0);
    edit(timing);
    cases.push_back({what, timing, node, code, field});
  };
  add("unknown job", [](auto& t) { t.set_job_id("nope"); }, absl::StatusCode::kNotFound,
      "attention_timing.job_id");
  add("old generation", [](auto& t) { t.set_generation(7); },
      absl::StatusCode::kFailedPrecondition, "attention_timing.generation");
  add("a worker", [](auto&) {}, absl::StatusCode::kPermissionDenied, "attention_timing", "w0");
  add("no cost", [](auto& t) { t.set_cost_units(0); }, absl::StatusCode::kInvalidArgument,
      "attention_timing.cost_units");
  add("NaN cost", [](auto& t) { t.set_cost_units(std::nan("")); },
      absl::StatusCode::kInvalidArgument, "attention_timing.cost_units");
  add("no time", [](auto& t) { t.set_seconds(0); }, absl::StatusCode::kInvalidArgument,
      "attention_timing.seconds");
  add("infinite time", [](auto& t) { t.set_seconds(INFINITY); },
      absl::StatusCode::kInvalidArgument, "attention_timing.seconds");
  add("negative micro-batch", [](auto& t) { t.set_micro_batch(-1); },
      absl::StatusCode::kInvalidArgument, "attention_timing.micro_batch");
  ExpectRefused(cases, [&](const std::string& node, const v1::AttentionTaskTiming& timing) {
    return planning_.OnAttentionTiming(node, 1, timing);
  });
  // Nothing was learned from them.
  ReportAll("job-1", 1, {{10}, {20}});
  EXPECT_EQ(planning_.LatestPlan("job-1")->server_measured_speed(0), 0.0);
}

// The workers get the weights of the job's current servers when they move
// more than 2% (at most every 5 s) and on every Rebalance.
TEST_F(AttentionPlanningTest, SpeedWeightsArePushedToTheWorkersWhenTheyMove) {
  cluster_.AddJob("job-1", 2, 2);
  // Step plans go to rank 0 too (ReportAll below); this is about weights.
  auto weight_pushes = [&] { return Pushes(v1::SchedulerCommand::kAttentionWeights); };
  auto weights_of = [](const Pushed& p) {
    return std::vector<double>(p.command.attention_weights().weights().begin(),
                               p.command.attention_weights().weights().end());
  };
  // One server measured: the other counts as the mean, the weights stay equal.
  ASSERT_TRUE(planning_.OnAttentionTiming("a0", 1, Timing("job-1", 100, 1.0)).ok());
  EXPECT_TRUE(weight_pushes().empty());
  // a1 is half as fast: both workers hear of it.
  ASSERT_TRUE(planning_.OnAttentionTiming("a1", 1, Timing("job-1", 50, 1.0)).ok());
  ASSERT_EQ(weight_pushes().size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    const Pushed p = weight_pushes()[rank];
    EXPECT_EQ(p.node, absl::StrCat("w", rank));
    EXPECT_EQ(p.incarnation, 1u);
    ASSERT_TRUE(p.command.has_attention_weights());
    const v1::AttentionSpeedWeights& w = p.command.attention_weights();
    EXPECT_EQ(w.job_id(), "job-1");
    EXPECT_EQ(w.generation(), 1u);
    EXPECT_EQ(w.attention_epoch(), 0u);
    EXPECT_EQ(w.version(), 1u);
    ASSERT_EQ(w.weights_size(), 2);
    EXPECT_NEAR(w.weights(0), 4.0 / 3, 1e-12);
    EXPECT_NEAR(w.weights(1), 2.0 / 3, 1e-12);
  }
  // Under 2% of change: nothing.
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(planning_.OnAttentionTiming("a1", 1, Timing("job-1", 50.5, 1.0)).ok());
  EXPECT_EQ(weight_pushes().size(), 2u);
  // A big change goes out (6 s after the last push)...
  ASSERT_TRUE(planning_.OnAttentionTiming("a1", 1, Timing("job-1", 5, 1.0)).ok());
  ASSERT_EQ(weight_pushes().size(), 4u);
  EXPECT_EQ(weight_pushes()[3].command.attention_weights().version(), 2u);
  const double slow = weights_of(weight_pushes()[3])[1];
  EXPECT_LT(slow, 2.0 / 3 * 0.9);
  // ...but the next big change within 5 s waits...
  clock_.Advance(absl::Seconds(3));
  ASSERT_TRUE(planning_.OnAttentionTiming("a1", 1, Timing("job-1", 5, 1.0)).ok());
  EXPECT_EQ(weight_pushes().size(), 4u) << "rate-limited";
  // ...for the first timing after them.
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(planning_.OnAttentionTiming("a0", 1, Timing("job-1", 100, 1.0)).ok());
  ASSERT_EQ(weight_pushes().size(), 6u);
  EXPECT_EQ(weight_pushes()[5].command.attention_weights().version(), 3u);
  EXPECT_LT(weights_of(weight_pushes()[5])[1], slow);

  // Rebalance pushes at once, whatever the change, and says which version.
  ReportAll("job-1", 1, {{200, 150, 90, 60}, {180, 120, 100, 40}});
  auto plans = planning_.Rebalance("job-1");
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_EQ((*plans)[0].pushed_weights_version(), 4u);
  ASSERT_EQ(weight_pushes().size(), 8u);
  EXPECT_EQ(weight_pushes()[7].command.attention_weights().version(), 4u);
  EXPECT_EQ(weights_of(weight_pushes()[7]), weights_of(weight_pushes()[5]));
  EXPECT_EQ(planning_.LatestPlan("job-1")->pushed_weights_version(), 4u);

  // A new attention epoch over a0 alone: its workers start equal, and one
  // server's weight is always 1 — nothing to send until a Rebalance.
  v1::Job& job = cluster_.job("job-1");
  job.set_attention_epoch(1);
  job.mutable_assigned_nodes()->RemoveLast();
  job.mutable_assigned_incarnations()->RemoveLast();
  job.set_assigned_attention_servers(1);
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(planning_.OnAttentionTiming("a0", 1, Timing("job-1", 100, 1.0)).ok());
  EXPECT_EQ(weight_pushes().size(), 8u);
  plans = planning_.Rebalance("job-1");
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_EQ(weight_pushes().size(), 10u);
  const v1::AttentionSpeedWeights epoch_1 = weight_pushes()[9].command.attention_weights();
  EXPECT_EQ(epoch_1.attention_epoch(), 1u);
  EXPECT_EQ(epoch_1.version(), 5u) << "versions only grow";
  EXPECT_EQ(epoch_1.weights_size(), 1);

  // A job that is no longer RUNNING gets nothing.
  job.set_state(v1::SUCCEEDED);
  plans = planning_.Rebalance("job-1");
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_EQ((*plans)[0].pushed_weights_version(), 0u);
  EXPECT_EQ(weight_pushes().size(), 10u);
}

// Every (worker, document) of the micro-batch is covered by its tasks
// exactly once, query rows [0, length) in contiguous pieces, and every task
// names one of the epoch's `servers` servers.
void ExpectCoversEveryDocumentOnce(const v1::AttentionStepPlan::MicroBatch& micro_batch,
                                   const std::vector<std::vector<int64_t>>& documents,
                                   int servers, const std::string& where) {
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> pieces;
  for (const v1::AttentionTask& task : micro_batch.tasks()) {
    EXPECT_GE(task.server(), 0) << where;
    EXPECT_LT(task.server(), servers) << where;
    pieces[{task.worker_rank(), task.document()}].push_back({task.q_begin(), task.q_end()});
  }
  size_t expected_documents = 0;
  for (size_t w = 0; w < documents.size(); ++w) {
    for (size_t d = 0; d < documents[w].size(); ++d) {
      ++expected_documents;
      auto it = pieces.find({static_cast<int>(w), static_cast<int>(d)});
      ASSERT_NE(it, pieces.end()) << where << ": worker " << w << " document " << d;
      std::sort(it->second.begin(), it->second.end());
      int64_t next = 0;
      for (auto [begin, end] : it->second) {
        EXPECT_EQ(begin, next) << where << ": worker " << w << " document " << d;
        EXPECT_GT(end, begin) << where;
        next = end;
      }
      EXPECT_EQ(next, documents[w][d]) << where << ": worker " << w << " document " << d;
    }
  }
  EXPECT_EQ(pieces.size(), expected_documents) << where << ": tasks for unknown documents";
}

TEST_F(AttentionPlanningTest, EveryMicroBatchOfAStepGoesToRankZeroOnce) {
  v1::Job& job = cluster_.AddJob("job-1", 2, 2);
  job.set_attention_epoch(3);
  job.set_assigned_incarnations(0, 4);  // w0 re-registered before the job placed it
  cluster_.node("w0").set_incarnation(4);
  // [rank][micro-batch][document]: the two micro-batches differ.
  const std::vector<std::vector<std::vector<int64_t>>> documents = {
      {{200, 150, 90}, {64, 32, 16, 8}},
      {{180, 120}, {300}},
  };
  ASSERT_TRUE(Send(MicroBatchDemand("job-1", 1, 7, documents[1])).ok());
  EXPECT_TRUE(StepPlans().empty()) << "rank 0 has not reported step 7 yet";
  ASSERT_TRUE(Send(MicroBatchDemand("job-1", 0, 7, documents[0])).ok());

  const std::vector<Pushed> plans = StepPlans();
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].node, "w0");
  EXPECT_EQ(plans[0].incarnation, 4u);
  const v1::AttentionStepPlan& step_plan = plans[0].command.attention_step_plan();
  EXPECT_EQ(step_plan.job_id(), "job-1");
  EXPECT_EQ(step_plan.generation(), 1u);
  EXPECT_EQ(step_plan.attention_epoch(), 3u);
  EXPECT_EQ(step_plan.step(), 7);
  EXPECT_EQ(step_plan.speed_weights_version(), 0u) << "no weights pushed: equal speeds";
  ASSERT_EQ(step_plan.micro_batches_size(), 2);
  for (int i = 0; i < 2; ++i) {
    ExpectCoversEveryDocumentOnce(step_plan.micro_batches(i), {documents[0][i], documents[1][i]},
                                  2, absl::StrCat("micro-batch ", i));
  }

  // Operators see the first micro-batch's plan, and that it went out.
  auto kept = planning_.LatestPlan("job-1");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->step(), 7);
  EXPECT_EQ(kept->attention_epoch(), 3u);
  EXPECT_EQ(kept->step_micro_batches(), 2);
  EXPECT_TRUE(kept->sent_to_workers());
  ASSERT_EQ(kept->tasks_size(), step_plan.micro_batches(0).tasks_size());
  for (int t = 0; t < kept->tasks_size(); ++t) {
    EXPECT_EQ(kept->tasks(t).DebugString(), step_plan.micro_batches(0).tasks(t).DebugString())
        << "task " << t;
  }
  // The same step again (redone after a failover): planned and sent again.
  ReportAllMicroBatches("job-1", 7, documents);
  EXPECT_EQ(StepPlans().size(), 2u);
}

TEST_F(AttentionPlanningTest, NothingGoesToWorkersOtherThanRankZero) {
  cluster_.AddJob("job-1", 3, 2);
  for (int64_t step = 1; step <= 3; ++step) {
    ReportAllMicroBatches("job-1", step, {{{10, 20}, {30}}, {{40}, {50}}, {{60}, {70, 80}}});
  }
  EXPECT_EQ(StepPlans().size(), 3u);
  ASSERT_EQ(pushed_.size(), 3u) << "no timings: no weights either";
  for (const Pushed& p : pushed_) {
    EXPECT_EQ(p.node, "w0");
    EXPECT_TRUE(p.command.has_attention_step_plan());
  }
}

// Tasks name the epoch's servers (the participants' list), not the ALIVE
// ones the scheduler planned over: a draining server keeps its index and
// gets nothing.
TEST_F(AttentionPlanningTest, StepPlansNameTheEpochsServerIndices) {
  cluster_.AddJob("job-1", 2, 3);
  cluster_.node("a1").set_state(v1::DRAINING);
  const std::vector<std::vector<std::vector<int64_t>>> documents = {
      {{400, 300, 200, 100, 50}, {250, 250, 120}},
      {{350, 220, 90, 60}, {500, 20}},
  };
  ReportAllMicroBatches("job-1", 1, documents);
  const std::vector<Pushed> plans = StepPlans();
  ASSERT_EQ(plans.size(), 1u);
  const v1::AttentionStepPlan& step_plan = plans[0].command.attention_step_plan();
  ASSERT_EQ(step_plan.micro_batches_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const auto& tasks = step_plan.micro_batches(i).tasks();
    ExpectCoversEveryDocumentOnce(step_plan.micro_batches(i), {documents[0][i], documents[1][i]},
                                  3, absl::StrCat("micro-batch ", i));
    EXPECT_TRUE(std::none_of(tasks.begin(), tasks.end(),
                             [](const auto& task) { return task.server() == 1; }))
        << "a1 is draining";
    EXPECT_TRUE(std::any_of(tasks.begin(), tasks.end(),
                            [](const auto& task) { return task.server() == 2; }))
        << "a2 is the epoch's server 2";
  }
  // The kept plan is over the ALIVE servers a0, a2: its index 1 is a2.
  auto kept = planning_.LatestPlan("job-1");
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_EQ(kept->server_names_size(), 2);
  EXPECT_EQ(kept->server_names(1), "a2");
  ASSERT_EQ(kept->tasks_size(), step_plan.micro_batches(0).tasks_size());
  for (int t = 0; t < kept->tasks_size(); ++t) {
    EXPECT_EQ(step_plan.micro_batches(0).tasks(t).server(), kept->tasks(t).server() == 1 ? 2 : 0);
  }
  EXPECT_EQ(step_plan.speed_weights_version(), 0u) << "not planned over every epoch server";
}

TEST_F(AttentionPlanningTest, DemandsOfAnotherAttentionEpochAreRefused) {
  cluster_.AddJob("job-1", 2, 2).set_attention_epoch(2);
  v1::AttentionDemand stale = Demand("job-1", 0, 1, {10});
  stale.set_attention_epoch(1);
  absl::Status status = Send(stale);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("attention_demand.attention_epoch: 1 is stale"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("attention epoch 2"));
  v1::AttentionDemand future = Demand("job-1", 0, 1, {10});
  future.set_attention_epoch(3);
  status = Send(future);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("attention_demand.attention_epoch: 3"));
  // Neither counted.
  ASSERT_TRUE(Report("job-1", 1, 1, {20}).ok());
  EXPECT_FALSE(planning_.LatestPlan("job-1").ok());
}

// After an attention failover (same generation, new epoch, fewer servers)
// the workers redo the failed step and report it and the next one again.
TEST_F(AttentionPlanningTest, ANewAttentionEpochReplansTheStepsBeingRedone) {
  v1::Job& job = cluster_.AddJob("job-1", 2, 2);
  ReportAll("job-1", 5, {{100, 40}, {90}});
  ReportAll("job-1", 6, {{80}, {70, 30}});
  ASSERT_TRUE(Report("job-1", 0, 7, {60}).ok());
  ASSERT_EQ(StepPlans().size(), 2u);

  // a1 lost during step 5.
  job.set_attention_epoch(1);
  job.mutable_assigned_nodes()->RemoveLast();
  job.mutable_assigned_incarnations()->RemoveLast();
  job.set_assigned_attention_servers(1);
  cluster_.node("a1").set_state(v1::DEAD);

  // Rank 0's step 7 was of the old epoch: rank 1's alone completes nothing.
  ASSERT_TRUE(Report("job-1", 1, 7, {60}).ok());
  EXPECT_EQ(StepPlans().size(), 2u);

  ReportAll("job-1", 5, {{100, 40}, {90}});
  std::vector<Pushed> plans = StepPlans();
  ASSERT_EQ(plans.size(), 3u) << "step 5 again, though step 6 was planned";
  const v1::AttentionStepPlan& redone = plans[2].command.attention_step_plan();
  EXPECT_EQ(redone.step(), 5);
  EXPECT_EQ(redone.attention_epoch(), 1u);
  ASSERT_EQ(redone.micro_batches_size(), 1);
  ExpectCoversEveryDocumentOnce(redone.micro_batches(0), {{100, 40}, {90}}, 1, "redone step 5");
  auto kept = planning_.LatestPlan("job-1");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->step(), 5) << "the new epoch's plan is the newest";
  EXPECT_EQ(kept->attention_epoch(), 1u);
  ASSERT_EQ(kept->server_names_size(), 1);
  EXPECT_EQ(kept->server_names(0), "a0");

  // Within the new epoch older steps are refused again.
  absl::Status late = Report("job-1", 0, 4, {10});
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_THAT(std::string(late.message()), HasSubstr("attention_demand.step"));
  ReportAll("job-1", 6, {{80}, {70, 30}});
  EXPECT_EQ(StepPlans().size(), 4u);
}

TEST_F(AttentionPlanningTest, OnlyARunningJobsRankZeroGetsStepPlans) {
  v1::Job& job = cluster_.AddJob("job-1", 2, 1);
  job.set_state(v1::RECOVERING);
  ReportAll("job-1", 1, {{10}, {20}});
  EXPECT_TRUE(pushed_.empty());
  auto kept = planning_.LatestPlan("job-1");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->step_micro_batches(), 1) << "planned for operators all the same";
  EXPECT_FALSE(kept->sent_to_workers());

  // Rank 0's session is gone: planned, not sent.
  job.set_state(v1::RUNNING);
  push_result_ = absl::NotFoundError("no session for w0");
  ReportAll("job-1", 2, {{10}, {20}});
  EXPECT_EQ(StepPlans().size(), 1u);
  EXPECT_FALSE(planning_.LatestPlan("job-1")->sent_to_workers());

  // No pusher at all.
  AttentionPlanning silent(cluster_.JobLookup(), cluster_.NodeLookup(), &clock_);
  ASSERT_TRUE(silent.OnAttentionDemand("w0", 1, Demand("job-1", 0, 3, {10})).ok());
  ASSERT_TRUE(silent.OnAttentionDemand("w1", 1, Demand("job-1", 1, 3, {20})).ok());
  auto silent_plan = silent.LatestPlan("job-1");
  ASSERT_TRUE(silent_plan.ok()) << silent_plan.status();
  EXPECT_FALSE(silent_plan->sent_to_workers());
}

// Workers that report different numbers of micro-batches get plans for
// the ones all of them have.
TEST_F(AttentionPlanningTest, PlansTheMicroBatchesEveryWorkerReported) {
  cluster_.AddJob("job-1", 2, 2);
  ReportAllMicroBatches("job-1", 1, {{{10}, {20}, {30}}, {{40}, {50}}});
  const std::vector<Pushed> plans = StepPlans();
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].command.attention_step_plan().micro_batches_size(), 2);
  EXPECT_EQ(planning_.LatestPlan("job-1")->step_micro_batches(), 2);
}

// A step plan names the speed weights version the workers have when it
// was planned with those weights, and 0 otherwise.
TEST_F(AttentionPlanningTest, StepPlansNameThePushedWeightsTheyUsed) {
  cluster_.AddJob("job-1", 2, 2);
  ASSERT_TRUE(planning_.OnAttentionTiming("a0", 1, Timing("job-1", 100, 1.0)).ok());
  ASSERT_TRUE(planning_.OnAttentionTiming("a1", 1, Timing("job-1", 50, 1.0)).ok());
  ASSERT_EQ(Pushes(v1::SchedulerCommand::kAttentionWeights).size(), 2u);  // version 1
  ReportAll("job-1", 1, {{200, 100}, {150}});
  ASSERT_EQ(StepPlans().size(), 1u);
  EXPECT_EQ(StepPlans()[0].command.attention_step_plan().speed_weights_version(), 1u);
  EXPECT_EQ(pushed_.back().command.body_case(), v1::SchedulerCommand::kAttentionStepPlan)
      << "after the weights it names";

  // A change too small to push: the step is still planned with the
  // weights the workers have (version 1), so the same documents get the
  // same plan — the one the participants would make themselves.
  ASSERT_TRUE(planning_.OnAttentionTiming("a1", 1, Timing("job-1", 45, 1.0)).ok());
  ASSERT_EQ(Pushes(v1::SchedulerCommand::kAttentionWeights).size(), 2u);
  ReportAll("job-1", 2, {{200, 100}, {150}});
  ASSERT_EQ(StepPlans().size(), 2u);
  const v1::AttentionStepPlan second = StepPlans()[1].command.attention_step_plan();
  EXPECT_EQ(second.speed_weights_version(), 1u);
  const v1::AttentionStepPlan first = StepPlans()[0].command.attention_step_plan();
  ASSERT_EQ(second.micro_batches(0).tasks_size(), first.micro_batches(0).tasks_size());
  for (int t = 0; t < first.micro_batches(0).tasks_size(); ++t) {
    EXPECT_EQ(second.micro_batches(0).tasks(t).SerializeAsString(),
              first.micro_batches(0).tasks(t).SerializeAsString())
        << "task " << t;
  }
}

TEST_F(AttentionPlanningTest, StepPlansUseEqualWeightsUntilWeightsArePushed) {
  cluster_.AddJob("job-1", 2, 2);
  ReportAll("job-1", 1, {{200, 100}, {150}});
  ASSERT_EQ(StepPlans().size(), 1u);
  const v1::AttentionStepPlan plan = StepPlans()[0].command.attention_step_plan();
  EXPECT_EQ(plan.speed_weights_version(), 0u);
  // Equal speeds: the two servers' causal pairs within the tolerance.
  std::vector<double> pairs(2, 0.0);
  for (const v1::AttentionTask& task : plan.micro_batches(0).tasks()) {
    const double q = task.q_end() - task.q_begin();
    pairs[task.server()] += q * task.q_end() - q * (q - 1) / 2;
  }
  EXPECT_NEAR(pairs[0] / (pairs[0] + pairs[1]), 0.5, 0.05);
}

}  // namespace
}  // namespace corescape::scheduler
