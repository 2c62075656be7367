#include "scheduler/job_manager.h"

#include <cmath>
#include <limits>
#include <set>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/clock.h"
#include "scheduler/event_log.h"
#include "scheduler/fault_injecting_state_store.h"
#include "scheduler/in_memory_state_store.h"
#include "scheduler/list_pages.h"
#include "scheduler/node_registry.h"
#include "scheduler/state_store.h"
#include "scheduler/state_test_util.h"

namespace corescape::scheduler {
namespace {

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(MakeDirectories(dir_ + "/data").ok());
    shard_ = dir_ + "/data/train-00000.shard";
    ASSERT_TRUE(WriteFileAtomically(shard_, "x").ok());
    Restart();
  }

  void Restart() {
    jobs_.reset();
    registry_.reset();
    events_.reset();
    store_.reset();
    absl::StatusOr<testing::TestState> state = testing::OpenTestState(dir_ + "/state", &clock_);
    ASSERT_TRUE(state.ok()) << state.status();
    store_ = std::move(state->store);
    events_ = std::move(state->events);
    NodeRegistryOptions options;
    options.lease_ttl = absl::Seconds(10);
    registry_ = std::make_unique<NodeRegistry>(&clock_, store_.get(), events_.get(), options);
    ASSERT_TRUE(registry_->Load().ok());
    JobManagerOptions job_options;
    job_options.elastic_grace = absl::Seconds(5);
    jobs_ = std::make_unique<JobManager>(&clock_, store_.get(), events_.get(), registry_.get(),
                                         job_options);
    ASSERT_TRUE(jobs_->Load().ok());
  }

  uint64_t AddWorker(const std::string& name, v1::NodeRole role = v1::WORKER,
                     const std::string& checkpoint_root = "", const std::string& data_root = "") {
    v1::RegisterRequest request;
    request.mutable_resources()->set_checkpoint_root(checkpoint_root);
    request.mutable_resources()->set_data_root(data_root);
    request.set_name(name);
    request.set_role(role);
    request.set_host("h-" + name);
    request.set_pid(100);
    request.set_grpc_address("127.0.0.1:7000");
    request.set_data_address("127.0.0.1:8000-" + name);
    auto response = registry_->Register(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response->incarnation();
  }

  v1::SubmitJobRequest Spec(int workers, int min_workers = 0) {
    v1::SubmitJobRequest request;
    v1::JobSpec& spec = *request.mutable_spec();
    spec.set_name("test");
    spec.mutable_model()->set_preset("tiny");
    spec.mutable_data()->add_train_shards(shard_);
    spec.mutable_data()->set_sequence_length(64);
    spec.mutable_data()->set_micro_batch_size(4);
    spec.mutable_data()->set_gradient_accumulation(1);
    spec.set_steps(10);
    spec.mutable_placement()->set_workers(workers);
    spec.mutable_placement()->set_min_workers(min_workers);
    return request;
  }

  v1::SubmitJobRequest DisaggregatedSpec(int workers, int attention_servers) {
    v1::SubmitJobRequest request = Spec(workers);
    request.mutable_spec()->mutable_attention()->set_mode(v1::DISAGGREGATED);
    request.mutable_spec()->mutable_attention()->set_attention_servers(attention_servers);
    return request;
  }

  std::vector<v1::SchedulerCommand> Commands(const std::string& node, uint64_t incarnation) {
    auto commands = registry_->TakeCommands(node, incarnation, absl::ZeroDuration());
    return commands.ok() ? *commands : std::vector<v1::SchedulerCommand>{};
  }

  // `rank`'s report of `step` of the job's current generation.
  static v1::StepReport StepReportOf(const v1::Job& job, int rank, int64_t step,
                                     int64_t checkpoint = -1) {
    v1::StepReport report;
    report.set_job_id(job.job_id());
    report.set_generation(job.generation());
    report.set_rank(rank);
    report.set_step(step);
    report.set_loss(5.0 - step * 0.1);
    report.set_validation_loss(NAN);
    report.set_checkpoint_step(checkpoint);
    return report;
  }

  void Report(const std::string& node, uint64_t incarnation, const v1::Job& job, int rank,
              int64_t step, int64_t checkpoint = -1) {
    jobs_->OnStepReport(node, incarnation, StepReportOf(job, rank, step, checkpoint));
  }

  v1::JobState StateOf(const std::string& id) { return jobs_->Get(id)->state(); }

  // A job of `workers` RUNNING on fresh workers w0, w1, …: rank 0 is w0.
  struct RunningJob {
    std::string id;
    uint64_t w0 = 0;        // w0's incarnation
    v1::StepReport report;  // rank 0's report of step 1
  };
  RunningJob StartRunningJob(int workers) {
    RunningJob running;
    running.w0 = AddWorker("w0");
    for (int i = 1; i < workers; ++i) AddWorker(absl::StrCat("w", i));
    auto job = jobs_->Submit(Spec(workers));
    EXPECT_TRUE(job.ok()) << job.status();
    jobs_->Reconcile();
    running.id = job->job_id();
    EXPECT_EQ(StateOf(running.id), v1::RUNNING);
    running.report = StepReportOf(*jobs_->Get(running.id), 0, 1);
    return running;
  }

  // A failure report of generation 1 from `rank` of the job.
  static v1::JobFailureReport FailureReport(const std::string& job_id, int rank,
                                            const std::string& error) {
    v1::JobFailureReport report;
    report.set_job_id(job_id);
    report.set_generation(1);
    report.set_rank(rank);
    report.set_error(error);
    return report;
  }

  std::string dir_, shard_;
  FakeClock clock_;
  std::unique_ptr<SqliteStateStore> store_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<JobManager> jobs_;
};

TEST_F(JobManagerTest, GangSchedulesOnlyWhenEnoughWorkersAndRunsToSuccess) {
  auto job = jobs_->Submit(Spec(2));
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = job->job_id();
  const uint64_t w0 = AddWorker("w0");
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(id), v1::PENDING);
  EXPECT_NE(jobs_->Get(id)->state_reason().find("waiting for 2"), std::string::npos);
  EXPECT_TRUE(Commands("w0", w0).empty());  // no partial placement

  const uint64_t w1 = AddWorker("w1");
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(id);
  EXPECT_EQ(running.state(), v1::RUNNING);
  EXPECT_EQ(running.generation(), 1u);
  ASSERT_EQ(running.assigned_nodes_size(), 2);
  auto c0 = Commands("w0", w0);
  auto c1 = Commands("w1", w1);
  ASSERT_EQ(c0.size(), 1u);
  ASSERT_EQ(c1.size(), 1u);
  EXPECT_EQ(c0[0].assign().rank() + c1[0].assign().rank(), 1);
  EXPECT_EQ(c0[0].assign().world_size(), 2);
  EXPECT_EQ(c0[0].assign().generation(), 1u);
  EXPECT_EQ(c0[0].assign().resume_from_step(), -1);
  EXPECT_FALSE(c0[0].assign().data_plane_token().empty());
  EXPECT_EQ(c0[0].assign().data_plane_token(), c1[0].assign().data_plane_token());
  EXPECT_EQ(c0[0].assign().peer_data_addresses_size(), 2);

  const std::string rank0 = running.assigned_nodes(0);
  const uint64_t inc0 = rank0 == "w0" ? w0 : w1;
  for (int step = 1; step <= 10; ++step) Report(rank0, inc0, running, 0, step);
  v1::Job done = *jobs_->Get(id);
  EXPECT_EQ(done.state(), v1::SUCCEEDED);
  EXPECT_EQ(done.progress().step(), 10);
  auto events = jobs_->EventsAfter(id, 0);
  ASSERT_TRUE(events.ok());
  int progress_events = 0;
  for (const auto& e : *events) progress_events += e.has_progress();
  EXPECT_EQ(progress_events, 10);
  EXPECT_EQ(events->back().state(), v1::SUCCEEDED);

  // The workers are free again for the next job.
  auto next = jobs_->Submit(Spec(2));
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(next->job_id()), v1::RUNNING);
}

// A CUDA job on workers without a GPU waits, saying so in its state and
// its events; a CPU job beside it runs, and a worker serving a GPU takes
// the CUDA job.
TEST_F(JobManagerTest, CudaJobWaitsForAGpuWorkerWithTheReasonInItsEvents) {
  AddWorker("w0");
  AddWorker("w1");
  v1::SubmitJobRequest cuda = Spec(1);
  cuda.mutable_spec()->set_device(v1::CUDA);
  auto cuda_job = jobs_->Submit(cuda);
  ASSERT_TRUE(cuda_job.ok()) << cuda_job.status();
  EXPECT_EQ(cuda_job->spec().device(), v1::CUDA);
  auto cpu_job = jobs_->Submit(Spec(1));
  ASSERT_TRUE(cpu_job.ok()) << cpu_job.status();
  EXPECT_EQ(cpu_job->spec().device(), v1::CPU);  // the default, filled
  jobs_->Reconcile();
  const std::string reason =
      "waiting for 1 healthy free workers with a CUDA GPU (device: cuda; 0 free now); 0 of 2 "
      "registered workers serve one (start corescape-worker --device=cuda:N)";
  EXPECT_EQ(StateOf(cuda_job->job_id()), v1::PENDING);
  EXPECT_EQ(jobs_->Get(cuda_job->job_id())->state_reason(), reason);
  EXPECT_EQ(StateOf(cpu_job->job_id()), v1::RUNNING);
  auto events = jobs_->EventsAfter(cuda_job->job_id(), 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].state(), v1::PENDING);
  EXPECT_EQ((*events)[1].message(), reason);
  jobs_->Reconcile();  // an unchanged reason is no new event
  EXPECT_EQ(jobs_->EventsAfter(cuda_job->job_id(), 0)->size(), 2u);

  v1::RegisterRequest gpu;
  gpu.set_name("g0");
  gpu.set_role(v1::WORKER);
  gpu.set_host("h-g0");
  gpu.set_pid(100);
  gpu.set_grpc_address("127.0.0.1:7000");
  gpu.set_data_address("127.0.0.1:8000-g0");
  gpu.mutable_resources()->set_gpus(1);
  gpu.mutable_resources()->mutable_device()->set_kind(v1::CUDA);
  ASSERT_TRUE(registry_->Register(gpu).ok());
  jobs_->Reconcile();
  v1::Job placed = *jobs_->Get(cuda_job->job_id());
  EXPECT_EQ(placed.state(), v1::RUNNING);
  ASSERT_EQ(placed.assigned_nodes_size(), 1);
  EXPECT_EQ(placed.assigned_nodes(0), "g0");
}

TEST_F(JobManagerTest, DeadWorkerTriggersRecoveryFromCheckpointWithNewGeneration) {
  const uint64_t w0 = AddWorker("w0");
  const uint64_t w1 = AddWorker("w1");
  auto job = jobs_->Submit(Spec(2));
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(job->job_id());
  const std::string rank0 = running.assigned_nodes(0);
  const std::string rank1 = running.assigned_nodes(1);
  const uint64_t inc0 = rank0 == "w0" ? w0 : w1;
  Report(rank0, inc0, running, 0, 1);
  Report(rank0, inc0, running, 0, 2, /*checkpoint=*/2);
  Report(rank0, inc0, running, 0, 3);
  Commands("w0", w0);
  Commands("w1", w1);

  // rank1 stops heartbeating; rank0 keeps renewing.
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(registry_->Renew(rank0, inc0).ok());
  clock_.Advance(absl::Seconds(6));
  registry_->ExpireLeases();
  jobs_->Reconcile();
  v1::Job recovering = *jobs_->Get(job->job_id());
  EXPECT_EQ(recovering.state(), v1::RECOVERING);
  EXPECT_NE(recovering.state_reason().find("checkpoint that verifies, up to step 2"), std::string::npos);
  auto stop = Commands(rank0, inc0);
  ASSERT_FALSE(stop.empty());
  EXPECT_TRUE(stop[0].has_stop_job());

  // A stale report from the old generation changes nothing.
  Report(rank0, inc0, running, 0, 4);
  EXPECT_EQ(jobs_->Get(job->job_id())->progress().step(), 3);

  // The dead worker comes back (new incarnation): the job re-forms.
  const uint64_t back = AddWorker(rank1);
  jobs_->Reconcile();
  v1::Job again = *jobs_->Get(job->job_id());
  EXPECT_EQ(again.state(), v1::RUNNING);
  EXPECT_EQ(again.generation(), 2u);
  EXPECT_EQ(again.recoveries(), 1);
  auto assign = Commands(rank1, back);
  ASSERT_EQ(assign.size(), 1u);
  EXPECT_EQ(assign[0].assign().resume_from_step(), 2);
  EXPECT_EQ(assign[0].assign().generation(), 2u);
}

// A failure report arrives before the dead peer's lease expires: the
// recovery does not place the job on the failed generation's workers that
// stayed silent since the report — it uses a spare, or waits for them.
TEST_F(JobManagerTest, FailureReportAvoidsWorkersSilentSinceIt) {
  const uint64_t w0 = AddWorker("w0");
  const uint64_t w1 = AddWorker("w1");
  auto job = jobs_->Submit(Spec(2));
  jobs_->Reconcile();
  ASSERT_EQ(StateOf(job->job_id()), v1::RUNNING);
  Commands("w0", w0);
  Commands("w1", w1);
  clock_.Advance(absl::Seconds(1));
  v1::JobFailureReport failure =
      FailureReport(job->job_id(), 0, "rank 1 (w1) failed: connection timed out");
  jobs_->OnJobFailure("w0", w0, failure);
  ASSERT_EQ(StateOf(job->job_id()), v1::RECOVERING);
  // Neither has heartbeated since: nothing is placed yet.
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(job->job_id()), v1::RECOVERING);
  // w0 (the reporter) heartbeats, w1 stays silent, a spare registers.
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(registry_->Renew("w0", w0).ok());
  const uint64_t w2 = AddWorker("w2");
  jobs_->Reconcile();
  v1::Job recovered = *jobs_->Get(job->job_id());
  ASSERT_EQ(recovered.state(), v1::RUNNING) << recovered.state_reason();
  EXPECT_EQ(recovered.generation(), 2u);
  EXPECT_EQ(std::vector<std::string>(recovered.assigned_nodes().begin(),
                                     recovered.assigned_nodes().end()),
            (std::vector<std::string>{"w0", "w2"}));
  ASSERT_EQ(Commands("w2", w2).size(), 1u);

  // A transient failure: both workers heartbeat again, and without a spare
  // the job re-forms on them.
  Commands("w0", w0);
  clock_.Advance(absl::Seconds(1));
  failure.set_generation(2);
  jobs_->OnJobFailure("w0", w0, failure);
  ASSERT_TRUE(registry_->Deregister("w2", w2, "test").ok());
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(registry_->Renew("w0", w0).ok());
  ASSERT_TRUE(registry_->Renew("w1", w1).ok());
  jobs_->Reconcile();
  v1::Job again = *jobs_->Get(job->job_id());
  ASSERT_EQ(again.state(), v1::RUNNING) << again.state_reason();
  EXPECT_EQ(again.generation(), 3u);
}

TEST_F(JobManagerTest, ReportsFromOutsideTheGenerationChangeNothing) {
  const uint64_t w0 = AddWorker("w0");
  const uint64_t w1 = AddWorker("w1");
  const uint64_t w2 = AddWorker("w2");  // a spare, not in the job
  auto job = jobs_->Submit(Spec(2));
  jobs_->Reconcile();
  ASSERT_EQ(StateOf(job->job_id()), v1::RUNNING);
  v1::JobFailureReport forged = FailureReport(job->job_id(), 0, "forged");
  for (int i = 0; i < 5; ++i) {
    jobs_->OnJobFailure("w2", w2, forged);       // a node outside the job
    jobs_->OnJobFailure("w0", w0 + 7, forged);   // a member's name, another incarnation
    jobs_->OnJobFailure("nobody", 1, forged);    // no such node
  }
  EXPECT_EQ(StateOf(job->job_id()), v1::RUNNING);
  EXPECT_EQ(jobs_->Get(job->job_id())->recoveries(), 0);
  // A member's report still counts.
  jobs_->OnJobFailure("w1", w1, forged);
  EXPECT_EQ(StateOf(job->job_id()), v1::RECOVERING);
}

// Only rank 0 of the current generation moves progress or ends the job:
// a last-step report from anyone else (another node, a member's old
// incarnation, a member at another rank, a stale generation) changes nothing.
TEST_F(JobManagerTest, StepReportsFromNonMembersChangeNothing) {
  const uint64_t w0 = AddWorker("w0");
  const uint64_t w1 = AddWorker("w1");
  const uint64_t w2 = AddWorker("w2");
  auto job = jobs_->Submit(Spec(2));
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(job->job_id());
  ASSERT_EQ(running.state(), v1::RUNNING);
  ASSERT_EQ(running.assigned_nodes(0), "w0");
  Report("w2", w2, running, 0, 10);      // not a member, claiming rank 0
  Report("w0", w0 + 1, running, 0, 10);  // rank 0's name, another incarnation
  Report("w1", w1, running, 1, 10);      // a member, but not rank 0
  Report("w1", w1, running, 0, 10);      // a member claiming another's rank
  v1::Job stale = running;
  stale.set_generation(running.generation() + 1);
  Report("w0", w0, stale, 0, 10);        // a generation that does not exist
  v1::Job unchanged = *jobs_->Get(job->job_id());
  EXPECT_EQ(unchanged.state(), v1::RUNNING);
  EXPECT_EQ(unchanged.progress().step(), 0);
  auto events = jobs_->EventsAfter(job->job_id(), 0);
  ASSERT_TRUE(events.ok());
  for (const auto& event : *events) EXPECT_FALSE(event.has_progress());
  Report("w0", w0, running, 0, 10);
  EXPECT_EQ(StateOf(job->job_id()), v1::SUCCEEDED);
}

TEST_F(JobManagerTest, ByteCountersSaturate) {
  auto [id, w0, report] = StartRunningJob(2);
  for (int step = 1; step <= 3; ++step) {
    report.set_step(step);
    report.set_bytes_sent(std::numeric_limits<int64_t>::max() - 1);
    report.set_bytes_received(-5);
    jobs_->OnStepReport("w0", w0, report);
  }
  EXPECT_EQ(jobs_->Get(id)->progress().bytes_sent(),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(jobs_->Get(id)->progress().bytes_received(), 0);
}

// Rank 0's model TFLOP/s and MFU become the job's; a rate that is not a
// finite positive number shows as unknown (0).
TEST_F(JobManagerTest, ProgressCarriesModelFlopsUtilization) {
  auto [id, w0, report] = StartRunningJob(2);
  report.set_model_tflops_per_second(412.5);
  report.set_mfu(0.417);
  jobs_->OnStepReport("w0", w0, report);
  EXPECT_EQ(jobs_->Get(id)->progress().model_tflops_per_second(), 412.5);
  EXPECT_EQ(jobs_->Get(id)->progress().mfu(), 0.417);
  report.set_step(2);
  report.set_model_tflops_per_second(NAN);
  report.set_mfu(-1);
  jobs_->OnStepReport("w0", w0, report);
  EXPECT_EQ(jobs_->Get(id)->progress().model_tflops_per_second(), 0);
  EXPECT_EQ(jobs_->Get(id)->progress().mfu(), 0);
  report.set_step(3);
  report.set_mfu(std::numeric_limits<double>::infinity());
  jobs_->OnStepReport("w0", w0, report);
  EXPECT_EQ(jobs_->Get(id)->progress().mfu(), 0);
}

// The job's own throughput: the global batch's tokens (64 × 4 × 2 = 512)
// of each step over the wall time between rank 0's reports, the first step
// by its own compute and communication time; repeats count once, lost
// reports' steps with the next one.
TEST_F(JobManagerTest, ThroughputCountsTheWallTimeOfTheSteps) {
  RunningJob job = StartRunningJob(2);
  v1::StepReport& report = job.report;
  report.set_compute_seconds(0.75);
  report.set_communication_seconds(0.25);
  report.set_tokens_per_second(99);  // the step's own rate, not the average
  auto reported = [&](int64_t step, absl::Duration after) {
    clock_.Advance(after);
    report.set_step(step);
    jobs_->OnStepReport("w0", job.w0, report);
    return jobs_->Get(job.id)->progress();
  };
  v1::JobProgress progress = reported(1, absl::ZeroDuration());
  EXPECT_EQ(progress.tokens_trained(), 512);
  EXPECT_DOUBLE_EQ(progress.steps_seconds(), 1.0);
  EXPECT_EQ(progress.steps_timed(), 1);
  progress = reported(2, absl::Seconds(2));
  EXPECT_EQ(progress.tokens_trained(), 1024);
  EXPECT_DOUBLE_EQ(progress.steps_seconds(), 3.0);
  progress = reported(4, absl::Seconds(3));  // step 3's report was lost
  EXPECT_EQ(progress.tokens_trained(), 2048);
  EXPECT_DOUBLE_EQ(progress.steps_seconds(), 6.0);
  EXPECT_EQ(progress.steps_timed(), 4);
  progress = reported(4, absl::Seconds(1));  // a repeat
  EXPECT_EQ(progress.steps_timed(), 4);
  progress = reported(5, absl::Seconds(1));
  EXPECT_EQ(progress.tokens_trained(), 2560);
  EXPECT_DOUBLE_EQ(progress.steps_seconds(), 8.0);
  EXPECT_EQ(progress.steps_timed(), 5);
  EXPECT_EQ(progress.tokens_per_second(), 99);
  // Past the job's steps (a garbled report) counts nothing.
  progress = reported(1000, absl::Seconds(1));
  EXPECT_EQ(progress.steps_timed(), 5);
}

// A first step whose time the worker sent garbled counts nothing; the next
// one is timed from its arrival.
TEST_F(JobManagerTest, ThroughputIgnoresAGarbledStepTime) {
  auto [id, w0, report] = StartRunningJob(1);
  report.set_compute_seconds(NAN);
  jobs_->OnStepReport("w0", w0, report);
  EXPECT_EQ(jobs_->Get(id)->progress().steps_timed(), 0);
  EXPECT_EQ(jobs_->Get(id)->progress().tokens_trained(), 0);
  clock_.Advance(absl::Seconds(2));
  report.set_step(2);
  jobs_->OnStepReport("w0", w0, report);
  const v1::JobProgress progress = jobs_->Get(id)->progress();
  EXPECT_EQ(progress.steps_timed(), 1);
  EXPECT_EQ(progress.tokens_trained(), 256);
  EXPECT_DOUBLE_EQ(progress.steps_seconds(), 2.0);
}

// Submit refuses datasets outside every registered worker's data root, in
// the same words for a path that exists and one that does not.
TEST_F(JobManagerTest, DatasetsMustLieInAWorkersDataRoot) {
  const std::string data_root = dir_ + "/data";
  AddWorker("w0", v1::WORKER, "", data_root);
  for (const std::string& elsewhere : {std::string("/etc/shadow"),
                                       std::string("/etc/corescape-no-such-file"),
                                       std::string("/dev/zero"), std::string("/proc/self/mem")}) {
    v1::SubmitJobRequest outside = Spec(1);
    outside.mutable_spec()->mutable_data()->set_train_shards(0, elsewhere);
    auto refused = jobs_->Submit(outside);
    ASSERT_FALSE(refused.ok()) << elsewhere;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().message(),
              absl::StrCat("spec.data.train_shards[0]: ", elsewhere,
                           " is outside the data root of every registered worker (", data_root,
                           "); choose a dataset under one, or start a worker with --data_root "
                           "holding it"));
  }
  EXPECT_TRUE(jobs_->List({}, 0).empty());
  EXPECT_TRUE(jobs_->Submit(Spec(1)).ok());
}

// Submit refuses a checkpoint directory no registered worker's root holds,
// naming it and the roots; placement puts a job only on workers whose root
// holds it, and a job held back by that waits saying so.
TEST_F(JobManagerTest, CheckpointDirectoryMustLieInAWorkersRoot) {
  const std::string root_a = "/corescape-test-nonexistent/a";
  const std::string root_b = "/corescape-test-nonexistent/b";
  const uint64_t w0 = AddWorker("w0", v1::WORKER, root_a);
  v1::SubmitJobRequest outside = Spec(1);
  outside.mutable_spec()->mutable_checkpoint()->set_directory("/corescape-test-nonexistent/c");
  auto refused = jobs_->Submit(outside);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "spec.checkpoint.directory: /corescape-test-nonexistent/c is outside the checkpoint "
            "root of every registered worker (/corescape-test-nonexistent/a); choose a directory "
            "under one, or start a worker with --checkpoint_root holding it");
  EXPECT_TRUE(jobs_->List({}, 0).empty());

  // Under the root of w1, which left (it may come back): accepted, but it
  // waits while only w0 is free.
  const uint64_t w1 = AddWorker("w1", v1::WORKER, root_b);
  ASSERT_TRUE(registry_->Deregister("w1", w1, "test").ok());
  v1::SubmitJobRequest inside = Spec(1);
  inside.mutable_spec()->mutable_checkpoint()->set_directory(root_b + "/ckpt");
  auto job = jobs_->Submit(inside);
  ASSERT_TRUE(job.ok()) << job.status();
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(job->job_id()), v1::PENDING);
  EXPECT_EQ(jobs_->Get(job->job_id())->state_reason(),
            "waiting for 1 healthy free workers (1 free now); checkpoint.directory "
            "/corescape-test-nonexistent/b/ckpt is outside the checkpoint root of 1 of them "
            "(/corescape-test-nonexistent/a; corescape-worker --checkpoint_root)");
  EXPECT_TRUE(Commands("w0", w0).empty());

  // w1 registers again: the job runs there.
  const uint64_t w1_again = AddWorker("w1", v1::WORKER, root_b);
  EXPECT_NE(w1_again, w1);
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(job->job_id());
  EXPECT_EQ(running.state(), v1::RUNNING);
  ASSERT_EQ(running.assigned_nodes_size(), 1);
  EXPECT_EQ(running.assigned_nodes(0), "w1");
  EXPECT_EQ(jobs_->RunningJobsByNode(),
            (std::map<std::string, std::string>{{"w1", job->job_id()}}));
}

TEST_F(JobManagerTest, ElasticJobShrinksAndRaisesAccumulation) {
  const uint64_t w0 = AddWorker("w0");
  AddWorker("w1");
  auto job = jobs_->Submit(Spec(2, /*min_workers=*/1));
  jobs_->Reconcile();
  v1::JobFailureReport failure =
      FailureReport(job->job_id(), 1, "all_reduce: peer rank 1 timed out");
  jobs_->OnJobFailure("w0", w0, failure);
  EXPECT_EQ(StateOf(job->job_id()), v1::RECOVERING);
  // w1 is gone for good.
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(registry_->Renew("w0", w0).ok());
  clock_.Advance(absl::Seconds(5));
  registry_->ExpireLeases();
  jobs_->Reconcile();
  v1::Job shrunk = *jobs_->Get(job->job_id());
  EXPECT_EQ(shrunk.state(), v1::RUNNING);
  EXPECT_EQ(shrunk.assigned_nodes_size(), 1);
  EXPECT_EQ(shrunk.gradient_accumulation(), 2);
}

// After a recovery the job's events name the checkpoint the workers
// restored: an older one when the newest failed verification (once "500"
// was claimed while 400 was restored), and the next recovery asks for that.
TEST_F(JobManagerTest, RestoreEventNamesTheCheckpointActuallyRestored) {
  const uint64_t w0 = AddWorker("w0");
  auto job = jobs_->Submit(Spec(1));
  ASSERT_TRUE(job.ok()) << job.status();
  jobs_->Reconcile();
  Commands("w0", w0);
  v1::Job running = *jobs_->Get(job->job_id());
  Report("w0", w0, running, 0, 4, /*checkpoint=*/4);
  Report("w0", w0, running, 0, 6, /*checkpoint=*/6);
  jobs_->OnJobFailure("w0", w0, FailureReport(job->job_id(), 0, "out of memory"));
  v1::Job recovering = *jobs_->Get(job->job_id());
  ASSERT_EQ(recovering.state(), v1::RECOVERING);
  EXPECT_NE(recovering.state_reason().find(
                "restarting from the newest checkpoint that verifies, up to step 6"),
            std::string::npos)
      << recovering.state_reason();
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(registry_->Renew("w0", w0).ok());
  jobs_->Reconcile();
  auto assignment = Commands("w0", w0);
  ASSERT_FALSE(assignment.empty());
  ASSERT_TRUE(assignment.back().has_assign());
  EXPECT_EQ(assignment.back().assign().resume_from_step(), 6);
  v1::Job second = *jobs_->Get(job->job_id());
  ASSERT_EQ(second.generation(), 2u);

  // Step 6 failed its checksum on the worker: it restored step 4.
  v1::StepReport first = StepReportOf(second, 0, 5, /*checkpoint=*/4);
  first.set_restored_checkpoint_step(4);
  jobs_->OnStepReport("w0", w0, first);
  auto events = jobs_->EventsAfter(job->job_id(), 0);
  ASSERT_TRUE(events.ok());
  std::vector<std::string> messages;
  for (const v1::JobEvent& event : *events) {
    if (event.body_case() == v1::JobEvent::BODY_NOT_SET) messages.push_back(event.message());
  }
  EXPECT_EQ(messages, std::vector<std::string>{
                          "restored checkpoint step 4, not step 6: newer checkpoints failed "
                          "verification"});
  EXPECT_EQ(jobs_->Get(job->job_id())->progress().checkpoint_step(), 4);
  // Later reports of the generation add no restore event.
  v1::StepReport later = StepReportOf(second, 0, 6, /*checkpoint=*/4);
  later.set_restored_checkpoint_step(4);
  jobs_->OnStepReport("w0", w0, later);
  int restore_events = 0;
  const auto after_later = jobs_->EventsAfter(job->job_id(), 0);
  ASSERT_TRUE(after_later.ok());
  for (const v1::JobEvent& event : *after_later) {
    restore_events += event.body_case() == v1::JobEvent::BODY_NOT_SET;
  }
  EXPECT_EQ(restore_events, 1);

  // The next recovery asks for what exists; a restore as asked says so.
  jobs_->OnJobFailure("w0", w0, [&] {
    v1::JobFailureReport failure = FailureReport(job->job_id(), 0, "out of memory");
    failure.set_generation(2);
    return failure;
  }());
  EXPECT_NE(jobs_->Get(job->job_id())->state_reason().find("up to step 4"), std::string::npos)
      << jobs_->Get(job->job_id())->state_reason();
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(registry_->Renew("w0", w0).ok());
  jobs_->Reconcile();
  v1::Job third = *jobs_->Get(job->job_id());
  ASSERT_EQ(third.generation(), 3u);
  v1::StepReport as_asked = StepReportOf(third, 0, 5, /*checkpoint=*/4);
  as_asked.set_restored_checkpoint_step(4);
  jobs_->OnStepReport("w0", w0, as_asked);
  std::string last_restore;
  const auto after_third = jobs_->EventsAfter(job->job_id(), 0);
  ASSERT_TRUE(after_third.ok());
  for (const v1::JobEvent& event : *after_third) {
    if (event.body_case() == v1::JobEvent::BODY_NOT_SET) last_restore = event.message();
  }
  EXPECT_EQ(last_restore, "restored checkpoint step 4");
}

TEST_F(JobManagerTest, CancelStopsNodesAndIsFinal) {
  const uint64_t w0 = AddWorker("w0");
  auto job = jobs_->Submit(Spec(1));
  jobs_->Reconcile();
  Commands("w0", w0);
  auto cancelled = jobs_->Cancel(job->job_id(), "");
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  auto stop = Commands("w0", w0);
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_TRUE(stop[0].has_stop_job());
  EXPECT_EQ(jobs_->Cancel(job->job_id(), "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(jobs_->Cancel("job-999", "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobManagerTest, JobsSurviveRestartAndIdempotentSubmit) {
  auto request = Spec(1);
  request.set_idempotency_key("abc");
  auto first = jobs_->Submit(request);
  auto again = jobs_->Submit(request);
  EXPECT_EQ(first->job_id(), again->job_id());
  const uint64_t w0 = AddWorker("w0");
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(first->job_id());
  Report("w0", w0, running, 0, 4, /*checkpoint=*/4);
  Restart();
  v1::Job restored = *jobs_->Get(first->job_id());
  EXPECT_EQ(restored.state(), v1::RUNNING);
  EXPECT_EQ(restored.progress().checkpoint_step(), 4);
  EXPECT_EQ(jobs_->Submit(request)->job_id(), first->job_id());
  // The node resumes its session; the job keeps running and finishes.
  ASSERT_TRUE(registry_->OpenSession("w0", w0).ok());
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(first->job_id()), v1::RUNNING);
  Report("w0", w0, restored, 0, 10);
  EXPECT_EQ(StateOf(first->job_id()), v1::SUCCEEDED);
  EXPECT_GE(jobs_->EventsAfter(first->job_id(), 0)->size(), 4u);
  auto second = jobs_->Submit(Spec(1));
  EXPECT_NE(second->job_id(), first->job_id());
}

// 10,000 jobs page by page, with jobs submitted between pages: each job that
// was there at the start comes exactly once, newest first, and no response
// nears gRPC's 4 MiB message limit.
TEST_F(JobManagerTest, TenThousandJobsListPageByPageEachExactlyOnce) {
  InMemoryStateStore memory;  // 10,000 fsyncs would take minutes
  EventLog events(&clock_, nullptr);
  JobManager jobs(&clock_, &memory, &events, registry_.get());
  std::set<std::string> submitted;
  for (int i = 0; i < 10000; ++i) {
    if (i % 7 == 0) clock_.Advance(absl::Milliseconds(1));  // ties in submission time too
    auto job = jobs.Submit(Spec(1));
    ASSERT_TRUE(job.ok()) << job.status();
    submitted.insert(job->job_id());
  }
  std::vector<v1::Job> listed;
  std::string token;
  int pages = 0;
  do {
    auto page = jobs.ListPage({}, kMaxPageSize, token);
    ASSERT_TRUE(page.ok()) << page.status();
    v1::ListJobsResponse response;
    for (const v1::Job& job : page->items) *response.add_jobs() = job;
    response.set_next_page_token(page->next_page_token);
    EXPECT_LT(response.ByteSizeLong(), size_t{4} << 20);
    EXPECT_LE(page->items.size(), static_cast<size_t>(kMaxPageSize));
    listed.insert(listed.end(), page->items.begin(), page->items.end());
    token = page->next_page_token;
    clock_.Advance(absl::Milliseconds(1));
    ASSERT_TRUE(jobs.Submit(Spec(1)).ok());  // newer: it belongs before every page left
    ASSERT_LT(++pages, 100);
  } while (!token.empty());
  EXPECT_GE(pages, 10);
  std::set<std::string> unique;
  for (const v1::Job& job : listed) EXPECT_TRUE(unique.insert(job.job_id()).second) << job.job_id();
  EXPECT_EQ(unique, submitted);
  for (size_t i = 1; i < listed.size(); ++i) {
    ASSERT_GE(listed[i - 1].submitted_unix_ms(), listed[i].submitted_unix_ms());
  }
  auto bad = jobs.ListPage({}, 10, EncodePageToken("jobs", "no-slash"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("page_token"), std::string::npos);
}

// Retention with an injected clock: an ended job keeps its events and key
// for `retention`, then loses both durably (a restart does not bring them
// back); running jobs and recent ends are untouched.
TEST_F(JobManagerTest, RetentionPrunesEndedJobsEventsAndKeysDurably) {
  const absl::Duration retention = absl::Hours(1);
  const uint64_t w0 = AddWorker("w0");
  v1::SubmitJobRequest keyed = Spec(1);
  keyed.set_idempotency_key("nightly");
  auto ended = jobs_->Submit(keyed);
  ASSERT_TRUE(ended.ok()) << ended.status();
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(ended->job_id());
  ASSERT_EQ(running.state(), v1::RUNNING);
  Report("w0", w0, running, 0, 10);
  ASSERT_EQ(StateOf(ended->job_id()), v1::SUCCEEDED);
  auto pending = jobs_->Submit(Spec(2));  // never placed: stays PENDING
  ASSERT_TRUE(pending.ok());
  const size_t ended_events = jobs_->EventsAfter(ended->job_id(), 0)->size();
  ASSERT_GE(ended_events, 3u);

  clock_.Advance(retention - absl::Seconds(1));
  EXPECT_EQ(jobs_->PruneFinished(retention), 0);
  EXPECT_EQ(jobs_->EventsAfter(ended->job_id(), 0)->size(), ended_events);
  EXPECT_EQ(jobs_->Submit(keyed)->job_id(), ended->job_id());

  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(jobs_->PruneFinished(retention), 1);
  EXPECT_EQ(jobs_->PruneFinished(retention), 0);  // nothing left to prune
  EXPECT_TRUE(jobs_->EventsAfter(ended->job_id(), 0)->empty());
  EXPECT_EQ(jobs_->Get(ended->job_id())->state(), v1::SUCCEEDED);  // the record stays
  EXPECT_FALSE(jobs_->EventsAfter(pending->job_id(), 0)->empty());
  Restart();
  EXPECT_TRUE(jobs_->EventsAfter(ended->job_id(), 0)->empty());
  EXPECT_FALSE(jobs_->EventsAfter(pending->job_id(), 0)->empty());
  auto resubmitted = jobs_->Submit(keyed);
  ASSERT_TRUE(resubmitted.ok());
  EXPECT_NE(resubmitted->job_id(), ended->job_id());
  EXPECT_NE(resubmitted->job_id(), pending->job_id());
}

TEST_F(JobManagerTest, InvalidSpecsNameTheField) {
  auto expect_field = [&](v1::SubmitJobRequest request, const std::string& field) {
    auto job = jobs_->Submit(request);
    ASSERT_FALSE(job.ok()) << field;
    EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(job.status().message().find(field), std::string::npos) << job.status();
  };
  auto r = Spec(1);
  r.mutable_spec()->set_steps(-3);
  expect_field(r, "spec.steps");
  r = Spec(1);
  r.mutable_spec()->mutable_model()->set_preset("gpt-9");
  expect_field(r, "spec.model.preset");
  r = Spec(1);
  r.mutable_spec()->mutable_model()->set_n_kv_heads(3);
  expect_field(r, "n_kv_heads");
  r = Spec(1);
  r.mutable_spec()->mutable_data()->set_sequence_length(100000);
  expect_field(r, "spec.data.sequence_length");
  r = Spec(1);
  r.mutable_spec()->mutable_data()->set_micro_batch_size(-1);
  expect_field(r, "spec.data.micro_batch_size");
  r = Spec(1);
  r.mutable_spec()->mutable_data()->set_train_shards(0, "../../etc/passwd");
  expect_field(r, "spec.data.train_shards[0]");
  r = Spec(1);
  r.mutable_spec()->set_name("job\x1b[2J");
  expect_field(r, "spec.name");
  r = Spec(1);
  r.mutable_spec()->mutable_model()->set_rope_theta(NAN);
  expect_field(r, "spec.model.rope_theta");
  r = Spec(5000);
  expect_field(r, "spec.placement.workers");
  r = Spec(1);
  r.mutable_spec()->mutable_optimizer()->set_name("sgd");
  expect_field(r, "spec.optimizer.name");
  r = Spec(1);
  r.mutable_spec()->mutable_optimizer()->set_name("scape");
  r.mutable_spec()->mutable_optimizer()->mutable_scape()->set_density(1.5);
  expect_field(r, "spec.optimizer.scape.density");
  r = Spec(1);
  r.mutable_spec()->mutable_checkpoint()->set_interval_steps(10);
  expect_field(r, "spec.checkpoint.directory");
  r = Spec(1);
  r.mutable_spec()->mutable_attention()->set_mode(v1::DISAGGREGATED);
  expect_field(r, "spec.attention.attention_servers");
  EXPECT_TRUE(jobs_->List({}, 0).empty());
}

TEST_F(JobManagerTest, DisaggregatedJobGangPlacesAttentionServers) {
  const uint64_t w0 = AddWorker("w0");
  const uint64_t w1 = AddWorker("w1");
  auto job = jobs_->Submit(DisaggregatedSpec(2, 2));
  ASSERT_TRUE(job.ok()) << job.status();
  const uint64_t a0 = AddWorker("a0", v1::ATTENTION_SERVER);
  jobs_->Reconcile();
  // Workers alone are not enough; neither is one server of two.
  EXPECT_EQ(StateOf(job->job_id()), v1::PENDING);
  EXPECT_NE(jobs_->Get(job->job_id())->state_reason().find(
                "waiting for 2 healthy free attention servers (1 free now)"),
            std::string::npos)
      << jobs_->Get(job->job_id())->state_reason();
  EXPECT_TRUE(Commands("w0", w0).empty());
  EXPECT_TRUE(Commands("a0", a0).empty());

  const uint64_t a1 = AddWorker("a1", v1::ATTENTION_SERVER);
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(job->job_id());
  ASSERT_EQ(running.state(), v1::RUNNING);
  ASSERT_EQ(running.assigned_nodes_size(), 4);  // workers by rank, then servers
  EXPECT_EQ(running.assigned_nodes(2), "a0");
  EXPECT_EQ(running.assigned_nodes(3), "a1");
  auto worker = Commands(running.assigned_nodes(0), running.assigned_nodes(0) == "w0" ? w0 : w1);
  ASSERT_EQ(worker.size(), 1u);
  EXPECT_EQ(worker[0].assign().rank(), 0);
  EXPECT_EQ(worker[0].assign().world_size(), 2);
  EXPECT_EQ(worker[0].assign().peer_data_addresses_size(), 2);
  ASSERT_EQ(worker[0].assign().attention_server_addresses_size(), 2);
  EXPECT_EQ(worker[0].assign().attention_server_addresses(1), "127.0.0.1:8000-a1");
  EXPECT_EQ(worker[0].assign().peer_names_size(), 4);
  auto server = Commands("a1", a1);
  ASSERT_EQ(server.size(), 1u);
  EXPECT_EQ(server[0].assign().rank(), 3);  // W + s in the attention communicator
  EXPECT_EQ(server[0].assign().world_size(), 4);
  EXPECT_EQ(server[0].assign().peer_data_addresses_size(), 2);
  EXPECT_EQ(server[0].assign().attention_server_addresses(0), "127.0.0.1:8000-a0");
  EXPECT_EQ(server[0].assign().data_plane_token(), worker[0].assign().data_plane_token());
  Commands("a0", a0);

  // A colocated job does not take the busy servers, nor wait for any.
  const uint64_t w2 = AddWorker("w2");
  auto colocated = jobs_->Submit(Spec(1));
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(colocated->job_id()), v1::RUNNING);
  EXPECT_EQ(jobs_->Get(colocated->job_id())->assigned_nodes_size(), 1);

  // A dead attention server: no recovery. The job stays RUNNING in the same
  // generation, re-planned over the server it has left (attention epoch 1).
  const std::string rank0 = running.assigned_nodes(0);
  const uint64_t inc0 = rank0 == "w0" ? w0 : w1;
  Report(rank0, inc0, running, 0, 1, /*checkpoint=*/1);
  Commands("w0", w0);
  Commands("w1", w1);
  Commands("a1", a1);
  clock_.Advance(absl::Seconds(6));
  for (auto [name, inc] : {std::pair<std::string, uint64_t>{"w0", w0}, {"w1", w1}, {"w2", w2}, {"a1", a1}}) {
    ASSERT_TRUE(registry_->Renew(name, inc).ok());
  }
  clock_.Advance(absl::Seconds(6));
  registry_->ExpireLeases();
  jobs_->Reconcile();
  v1::Job replanned = *jobs_->Get(job->job_id());
  EXPECT_EQ(replanned.state(), v1::RUNNING) << replanned.state_reason();
  EXPECT_EQ(replanned.generation(), 1u);
  EXPECT_EQ(replanned.recoveries(), 0);
  EXPECT_EQ(replanned.attention_epoch(), 1u);
  EXPECT_EQ(replanned.assigned_attention_servers(), 1);
  ASSERT_EQ(replanned.assigned_nodes_size(), 3);
  EXPECT_EQ(replanned.assigned_nodes(0), running.assigned_nodes(0));
  EXPECT_EQ(replanned.assigned_nodes(1), running.assigned_nodes(1));
  EXPECT_EQ(replanned.assigned_nodes(2), "a1");
  EXPECT_NE(replanned.state_reason().find("attention server 0 (a0) is DEAD; re-planned over 1 "
                                          "attention server (a1) in attention epoch 1"),
            std::string::npos)
      << replanned.state_reason();
  // Every worker and the surviving server get the new membership; a1 is now
  // attention rank W + 0.
  for (auto [name, inc] : {std::pair<std::string, uint64_t>{"w0", w0}, {"w1", w1}}) {
    auto commands = Commands(name, inc);
    ASSERT_EQ(commands.size(), 1u) << name;
    const v1::JobAssignment& assign = commands[0].assign();
    EXPECT_EQ(assign.generation(), 1u);
    EXPECT_EQ(assign.attention_epoch(), 1u);
    EXPECT_EQ(assign.world_size(), 2);
    EXPECT_EQ(assign.rank(), name == rank0 ? 0 : 1);
    ASSERT_EQ(assign.attention_server_addresses_size(), 1);
    EXPECT_EQ(assign.attention_server_addresses(0), "127.0.0.1:8000-a1");
    EXPECT_EQ(assign.attention_failover_timeout_ms(), 20000);  // 2 leases
  }
  auto survivor = Commands("a1", a1);
  ASSERT_EQ(survivor.size(), 1u);
  EXPECT_EQ(survivor[0].assign().rank(), 2);
  EXPECT_EQ(survivor[0].assign().world_size(), 3);
  EXPECT_EQ(survivor[0].assign().attention_epoch(), 1u);
  // The job's events say so, and show no recovery.
  auto events = jobs_->EventsAfter(job->job_id(), 0);
  ASSERT_TRUE(events.ok());
  int replans = 0;
  for (const v1::JobEvent& e : *events) {
    if (e.body_case() == v1::JobEvent::kAttentionEpoch) {
      ++replans;
      EXPECT_EQ(e.attention_epoch(), 1u);
      EXPECT_NE(e.message().find("a0"), std::string::npos) << e.message();
    }
    if (e.body_case() == v1::JobEvent::kState) EXPECT_NE(e.state(), v1::RECOVERING);
  }
  EXPECT_EQ(replans, 1);
  // The re-plan is durable.
  Restart();
  EXPECT_EQ(jobs_->Get(job->job_id())->attention_epoch(), 1u);
  EXPECT_EQ(jobs_->Get(job->job_id())->assigned_attention_servers(), 1);

  // A failure report from the old epoch is stale; progress goes on.
  v1::JobFailureReport stale = FailureReport(job->job_id(), 1, "attention server rank 2 failed");
  stale.set_attention_epoch(0);
  jobs_->OnJobFailure(replanned.assigned_nodes(1), rank0 == "w0" ? w1 : w0, stale);
  EXPECT_EQ(StateOf(job->job_id()), v1::RUNNING);

  // a0 comes back: the job grows back to the two servers it asked for
  // (epoch 2, same generation), and on success both are told.
  const uint64_t a0_back = AddWorker("a0", v1::ATTENTION_SERVER);
  jobs_->Reconcile();
  auto rejoined = Commands("a0", a0_back);
  ASSERT_EQ(rejoined.size(), 1u);
  EXPECT_EQ(rejoined[0].assign().attention_epoch(), 2u);
  EXPECT_EQ(rejoined[0].assign().rank(), 3);
  EXPECT_EQ(Commands("a1", a1).size(), 1u);
  EXPECT_EQ(jobs_->Get(job->job_id())->generation(), 1u);
  for (int step = 2; step <= 10; ++step) Report(rank0, inc0, replanned, 0, step);
  EXPECT_EQ(StateOf(job->job_id()), v1::SUCCEEDED);
  for (auto [name, incarnation] : {std::pair{"a1", a1}, std::pair{"a0", a0_back}}) {
    auto done = Commands(name, incarnation);
    ASSERT_EQ(done.size(), 1u) << name;
    EXPECT_TRUE(done[0].has_stop_job());
    EXPECT_EQ(done[0].stop_job().generation(), 1u);
  }
}

// Lost servers are replaced by free ones (a restarted server by itself); a
// failure reported in the current epoch is real; losing the last server with
// no spare restarts the job from its checkpoint (RECOVERING waits for
// servers), as before attention epochs.
// Draining an attention server re-plans the job without it (it is told to
// leave) once a replacement exists, never at the cost of a restart; a job
// that is short of servers grows back when a free one registers.
TEST_F(JobManagerTest, DrainedAttentionServersAreReplacedAndJobsGrowBack) {
  const uint64_t w0 = AddWorker("w0");
  auto job = jobs_->Submit(DisaggregatedSpec(1, 2));
  ASSERT_TRUE(job.ok()) << job.status();
  const uint64_t a0 = AddWorker("a0", v1::ATTENTION_SERVER);
  const uint64_t a1 = AddWorker("a1", v1::ATTENTION_SERVER);
  jobs_->Reconcile();
  ASSERT_EQ(StateOf(job->job_id()), v1::RUNNING);
  Commands("w0", w0);
  Commands("a0", a0);
  Commands("a1", a1);

  // a1 dies with no spare: the job goes on with a0 alone (epoch 1).
  ASSERT_TRUE(registry_->Deregister("a1", a1, "test").ok());
  jobs_->Reconcile();
  v1::Job one = *jobs_->Get(job->job_id());
  ASSERT_EQ(one.state(), v1::RUNNING) << one.state_reason();
  EXPECT_EQ(one.assigned_attention_servers(), 1);
  EXPECT_EQ(one.attention_epoch(), 1u);
  Commands("w0", w0);
  Commands("a0", a0);

  // Draining the only server changes nothing while there is no replacement.
  ASSERT_TRUE(registry_->Drain("a0", "maintenance").ok());
  jobs_->Reconcile();
  EXPECT_EQ(jobs_->Get(job->job_id())->attention_epoch(), 1u);
  EXPECT_TRUE(Commands("w0", w0).empty());

  // Two free servers register: the drained a0 is replaced and told to leave,
  // and the job grows back to the two servers it asked for (epoch 2).
  const uint64_t b0 = AddWorker("b0", v1::ATTENTION_SERVER);
  const uint64_t b1 = AddWorker("b1", v1::ATTENTION_SERVER);
  jobs_->Reconcile();
  v1::Job grown = *jobs_->Get(job->job_id());
  ASSERT_EQ(grown.state(), v1::RUNNING) << grown.state_reason();
  EXPECT_EQ(grown.generation(), 1u);
  EXPECT_EQ(grown.recoveries(), 0);
  EXPECT_EQ(grown.attention_epoch(), 2u);
  ASSERT_EQ(grown.assigned_nodes_size(), 3);
  EXPECT_EQ(grown.assigned_nodes(1), "b0");
  EXPECT_EQ(grown.assigned_nodes(2), "b1");
  EXPECT_NE(grown.state_reason().find("attention server 0 (a0) is draining; attention servers "
                                      "b0, b1 joined"),
            std::string::npos)
      << grown.state_reason();
  auto drained = Commands("a0", a0);  // the registry's DrainCommand, then StopJob
  ASSERT_FALSE(drained.empty());
  EXPECT_TRUE(drained.back().has_stop_job());
  auto worker = Commands("w0", w0);
  ASSERT_EQ(worker.size(), 1u);
  EXPECT_EQ(worker[0].assign().attention_server_addresses_size(), 2);
  EXPECT_EQ(worker[0].assign().attention_epoch(), 2u);
  EXPECT_EQ(Commands("b1", b1).size(), 1u);
  EXPECT_EQ(Commands("b0", b0).size(), 1u);

  // Nothing more to do: no new epoch.
  jobs_->Reconcile();
  EXPECT_EQ(jobs_->Get(job->job_id())->attention_epoch(), 2u);
}

TEST_F(JobManagerTest, LostAttentionServersAreReplacedThenLastLossRecovers) {
  const uint64_t w0 = AddWorker("w0");
  auto job = jobs_->Submit(DisaggregatedSpec(1, 1));
  ASSERT_TRUE(job.ok()) << job.status();
  const uint64_t a0 = AddWorker("a0", v1::ATTENTION_SERVER);
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(job->job_id());
  ASSERT_EQ(running.state(), v1::RUNNING);
  EXPECT_EQ(running.attention_epoch(), 0u);
  EXPECT_EQ(running.assigned_attention_servers(), 1);
  Report("w0", w0, running, 0, 2, /*checkpoint=*/2);
  Commands("w0", w0);
  Commands("a0", a0);

  // a0 restarts (a new incarnation) while a spare b0 waits: spares are
  // taken in name order, so the restarted a0 rejoins as its own replacement.
  const uint64_t b0 = AddWorker("b0", v1::ATTENTION_SERVER);
  const uint64_t a0_new = AddWorker("a0", v1::ATTENTION_SERVER);
  jobs_->Reconcile();
  v1::Job replaced = *jobs_->Get(job->job_id());
  ASSERT_EQ(replaced.state(), v1::RUNNING) << replaced.state_reason();
  EXPECT_EQ(replaced.generation(), 1u);
  EXPECT_EQ(replaced.attention_epoch(), 1u);
  ASSERT_EQ(replaced.assigned_nodes_size(), 2);
  EXPECT_EQ(replaced.assigned_nodes(1), "a0");  // the restarted a0 rejoins (ALIVE, free)
  EXPECT_EQ(replaced.assigned_incarnations(1), a0_new);
  EXPECT_NE(replaced.state_reason().find("attention server 0 (a0) restarted"), std::string::npos)
      << replaced.state_reason();
  auto worker = Commands("w0", w0);
  ASSERT_EQ(worker.size(), 1u);
  EXPECT_EQ(worker[0].assign().attention_epoch(), 1u);
  EXPECT_EQ(worker[0].assign().attention_server_addresses(0), "127.0.0.1:8000-a0");
  auto server = Commands("a0", a0_new);
  ASSERT_EQ(server.size(), 1u);
  EXPECT_EQ(server[0].assign().rank(), 1);
  EXPECT_EQ(server[0].assign().attention_epoch(), 1u);
  EXPECT_TRUE(Commands("b0", b0).empty());

  // The new a0 deregisters: b0, the free one, replaces it (epoch 2).
  ASSERT_TRUE(registry_->Deregister("a0", a0_new, "test").ok());
  jobs_->Reconcile();
  v1::Job again = *jobs_->Get(job->job_id());
  ASSERT_EQ(again.state(), v1::RUNNING) << again.state_reason();
  EXPECT_EQ(again.attention_epoch(), 2u);
  EXPECT_EQ(again.assigned_nodes(1), "b0");
  ASSERT_EQ(Commands("b0", b0).size(), 1u);

  // A failure in the current epoch is real: recovery, epochs start over.
  v1::JobFailureReport failure = FailureReport(job->job_id(), 1, "kernel failed");
  failure.set_attention_epoch(2);
  jobs_->OnJobFailure("b0", b0, failure);
  EXPECT_EQ(StateOf(job->job_id()), v1::RECOVERING);
  jobs_->Reconcile();
  v1::Job regenerated = *jobs_->Get(job->job_id());
  ASSERT_EQ(regenerated.state(), v1::RUNNING) << regenerated.state_reason();
  EXPECT_EQ(regenerated.generation(), 2u);
  EXPECT_EQ(regenerated.attention_epoch(), 0u);
  Commands("w0", w0);
  Commands("b0", b0);

  // The last server dies with no spare: recovery from the checkpoint.
  ASSERT_TRUE(registry_->Deregister("b0", b0, "test").ok());
  jobs_->Reconcile();
  v1::Job recovering = *jobs_->Get(job->job_id());
  EXPECT_EQ(recovering.state(), v1::RECOVERING);
  EXPECT_EQ(recovering.recoveries(), 2);
  EXPECT_NE(recovering.state_reason().find("attention server 0 (b0) is DEREGISTERED; no "
                                           "attention server left; restarting from the newest "
                                           "checkpoint that verifies, up to step 2"),
            std::string::npos)
      << recovering.state_reason();
  auto stop = Commands("w0", w0);
  ASSERT_FALSE(stop.empty());
  EXPECT_TRUE(stop[0].has_stop_job());
}

class JobManagerRefusedWritesTest : public JobManagerTest {
 protected:
  void SetUp() override {
    JobManagerTest::SetUp();
    refusing_ = std::make_unique<FaultInjectingStateStore>(store_.get());
    jobs_ = std::make_unique<JobManager>(&clock_, refusing_.get(), events_.get(),
                                         registry_.get());
  }
  // Job records refused while `refuse`; every other kind written.
  void Refuse(bool refuse) { refusing_->FailWrites(refuse ? -1 : 0, "job"); }
  std::unique_ptr<FaultInjectingStateStore> refusing_;
};

// Reconcile acts only on what it recorded: a decision the store refused
// changes nothing in memory and sends nothing, and the next pass decides
// it again.
TEST_F(JobManagerRefusedWritesTest, DecisionsAreRecordedBeforeTheyAreActedOn) {
  const uint64_t w0 = AddWorker("w0");
  const uint64_t w1 = AddWorker("w1");
  auto job = jobs_->Submit(Spec(2));
  ASSERT_TRUE(job.ok()) << job.status();
  Refuse(true);
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(job->job_id()), v1::PENDING);
  EXPECT_EQ(jobs_->Get(job->job_id())->generation(), 0u);
  EXPECT_TRUE(Commands("w0", w0).empty());
  EXPECT_TRUE(Commands("w1", w1).empty());
  Refuse(false);
  jobs_->Reconcile();
  ASSERT_EQ(StateOf(job->job_id()), v1::RUNNING);
  EXPECT_EQ(jobs_->Get(job->job_id())->generation(), 1u);
  ASSERT_EQ(Commands("w0", w0).size(), 1u);
  ASSERT_EQ(Commands("w1", w1).size(), 1u);

  // w1 restarts: the recovery is refused, so the job neither counts a
  // recovery nor is re-placed on w0 and the new w1 in the same pass.
  const uint64_t w1_new = AddWorker("w1");
  Refuse(true);
  jobs_->Reconcile();
  v1::Job still = *jobs_->Get(job->job_id());
  EXPECT_EQ(still.state(), v1::RUNNING);
  EXPECT_EQ(still.recoveries(), 0);
  EXPECT_EQ(still.generation(), 1u);
  for (const v1::SchedulerCommand& command : Commands("w1", w1_new)) {
    EXPECT_FALSE(command.has_assign());
  }
  Refuse(false);
  Commands("w0", w0);
  jobs_->Reconcile();
  v1::Job again = *jobs_->Get(job->job_id());
  ASSERT_EQ(again.state(), v1::RUNNING) << again.state_reason();
  EXPECT_EQ(again.recoveries(), 1);
  EXPECT_EQ(again.generation(), 2u);
  auto assigned = Commands("w1", w1_new);
  ASSERT_FALSE(assigned.empty());
  EXPECT_TRUE(assigned.back().has_assign());
  EXPECT_EQ(assigned.back().assign().generation(), 2u);

  // Restart the manager: what it recorded is what it acted on.
  refusing_.reset();
  Restart();
  EXPECT_EQ(jobs_->Get(job->job_id())->generation(), 2u);
  EXPECT_EQ(jobs_->Get(job->job_id())->recoveries(), 1);
}

TEST_F(JobManagerRefusedWritesTest, RefusedAttentionReplanSendsNothing) {
  const uint64_t w0 = AddWorker("w0");
  auto job = jobs_->Submit(DisaggregatedSpec(1, 1));
  ASSERT_TRUE(job.ok()) << job.status();
  const uint64_t a0 = AddWorker("a0", v1::ATTENTION_SERVER);
  jobs_->Reconcile();
  ASSERT_EQ(StateOf(job->job_id()), v1::RUNNING);
  Commands("w0", w0);
  Commands("a0", a0);
  const uint64_t b0 = AddWorker("b0", v1::ATTENTION_SERVER);
  ASSERT_TRUE(registry_->Deregister("a0", a0, "test").ok());
  Refuse(true);
  jobs_->Reconcile();
  EXPECT_EQ(jobs_->Get(job->job_id())->attention_epoch(), 0u);
  EXPECT_EQ(jobs_->Get(job->job_id())->assigned_nodes(1), "a0");
  EXPECT_TRUE(Commands("w0", w0).empty());
  EXPECT_TRUE(Commands("b0", b0).empty());
  Refuse(false);
  jobs_->Reconcile();
  v1::Job replanned = *jobs_->Get(job->job_id());
  EXPECT_EQ(replanned.attention_epoch(), 1u);
  EXPECT_EQ(replanned.assigned_nodes(1), "b0");
  EXPECT_EQ(Commands("w0", w0).size(), 1u);
  EXPECT_EQ(Commands("b0", b0).size(), 1u);
}

// Every component over one store that fails writes on demand, as a full
// disk does.
class JobManagerFailingStoreTest : public JobManagerTest {
 protected:
  void SetUp() override {
    JobManagerTest::SetUp();
    failing_ = std::make_unique<FaultInjectingStateStore>(store_.get());
    jobs_.reset();
    registry_.reset();
    events_ = std::make_unique<EventLog>(&clock_, failing_.get());
    NodeRegistryOptions options;
    options.lease_ttl = absl::Seconds(10);
    registry_ = std::make_unique<NodeRegistry>(&clock_, failing_.get(), events_.get(), options);
    jobs_ = std::make_unique<JobManager>(&clock_, failing_.get(), events_.get(),
                                         registry_.get());
  }

  // Records of `kind` on disk.
  size_t OnDisk(const std::string& kind) { return store_->LoadAll(kind)->size(); }

  std::unique_ptr<FaultInjectingStateStore> failing_;
};

TEST_F(JobManagerFailingStoreTest, SubmitIsOneTransaction) {
  v1::SubmitJobRequest request = Spec(1);
  request.set_idempotency_key("once");
  failing_->FailWrites(1, "jobkey");
  auto refused = jobs_->Submit(request);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  for (const char* kind : {"job", "jobtoken", "jobkey", "jobevent"}) {
    EXPECT_EQ(OnDisk(kind), 0u) << kind;
  }
  EXPECT_TRUE(jobs_->List({}, 0).empty());
  auto job = jobs_->Submit(request);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job_id(), "job-1");
  for (const char* kind : {"job", "jobtoken", "jobkey", "jobevent"}) {
    EXPECT_EQ(OnDisk(kind), 1u) << kind;
  }
  EXPECT_EQ(jobs_->Submit(request)->job_id(), "job-1");
}

// The store fails N writes while a worker dies: the node is DEAD at once,
// nothing is sent for a recovery that is not durable, and once the store
// accepts writes the job recovers onto the spare and finishes, with its
// success retried until it is recorded.
TEST_F(JobManagerFailingStoreTest, StoreFailingNWritesLeavesNoJobStuck) {
  const uint64_t w0 = AddWorker("w0");
  const uint64_t w1 = AddWorker("w1");
  auto job = jobs_->Submit(Spec(2));
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = job->job_id();
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(id);
  ASSERT_EQ(running.state(), v1::RUNNING);
  ASSERT_EQ(running.assigned_nodes(0), "w0");
  Report("w0", w0, running, 0, 4, /*checkpoint=*/4);
  const uint64_t w2 = AddWorker("w2");  // the spare
  Commands("w0", w0);
  Commands("w1", w1);

  constexpr int kRefusedWrites = 8;
  failing_->FailWrites(kRefusedWrites);
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(registry_->Renew("w0", w0).ok());
  ASSERT_TRUE(registry_->Renew("w2", w2).ok());
  clock_.Advance(absl::Seconds(6));
  EXPECT_EQ(registry_->ExpireLeases(), std::vector<std::string>{"w1"});
  EXPECT_EQ(registry_->Get("w1")->state(), v1::DEAD);
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(id), v1::RUNNING);  // the recovery was refused...
  EXPECT_TRUE(Commands("w0", w0).empty());  // ...so no StopJob left

  // Sweeps go on as the reaper's do, until the refused writes are spent.
  v1::Job recovered;
  for (int pass = 0; pass < 20; ++pass) {
    ASSERT_TRUE(registry_->Renew("w0", w0).ok());
    ASSERT_TRUE(registry_->Renew("w2", w2).ok());
    registry_->ExpireLeases();
    jobs_->Reconcile();
    recovered = *jobs_->Get(id);
    if (recovered.generation() == 2 && recovered.state() == v1::RUNNING) break;
  }
  EXPECT_EQ(failing_->refused(), kRefusedWrites);
  ASSERT_EQ(recovered.state(), v1::RUNNING) << recovered.state_reason();
  ASSERT_EQ(recovered.generation(), 2u);
  EXPECT_EQ(recovered.recoveries(), 1);
  EXPECT_EQ(std::vector<std::string>(recovered.assigned_nodes().begin(),
                                     recovered.assigned_nodes().end()),
            (std::vector<std::string>{"w0", "w2"}));
  auto assigned = Commands("w2", w2);
  ASSERT_FALSE(assigned.empty());
  EXPECT_EQ(assigned.back().assign().resume_from_step(), 4);
  // w1's DEAD lands on the sweep after the store took writes again.
  registry_->ExpireLeases();
  v1::NodeInfo w1_on_disk;
  auto nodes = store_->LoadAll("node");
  for (const auto& [name, value] : *nodes) {
    if (name == "w1") {
      ASSERT_TRUE(w1_on_disk.ParseFromString(value));
    }
  }
  EXPECT_EQ(w1_on_disk.state(), v1::DEAD);

  // The last step's report arrives while job records are refused: the
  // workers will not report again, so Reconcile records the success.
  failing_->FailWrites(-1, "job");
  Report("w0", w0, recovered, 0, 10);
  EXPECT_EQ(StateOf(id), v1::RUNNING);
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(id), v1::RUNNING);
  failing_->Recover();
  jobs_->Reconcile();
  EXPECT_EQ(StateOf(id), v1::SUCCEEDED);
  Restart();
  EXPECT_EQ(StateOf(id), v1::SUCCEEDED);
  EXPECT_EQ(jobs_->Get(id)->recoveries(), 1);
}

TEST_F(JobManagerFailingStoreTest, RefusedPruneChangesNothingAndIsRetried) {
  auto job = jobs_->Submit(Spec(1));
  ASSERT_TRUE(jobs_->Cancel(job->job_id(), "").ok());
  clock_.Advance(absl::Hours(2));
  failing_->FailWrites(1, "jobevent");
  EXPECT_EQ(jobs_->PruneFinished(absl::Hours(1)), 0);
  EXPECT_FALSE(jobs_->EventsAfter(job->job_id(), 0)->empty());
  EXPECT_EQ(OnDisk("jobtoken"), 1u);
  EXPECT_EQ(jobs_->PruneFinished(absl::Hours(1)), 1);
  EXPECT_TRUE(jobs_->EventsAfter(job->job_id(), 0)->empty());
  EXPECT_EQ(OnDisk("jobtoken"), 0u);
  EXPECT_EQ(OnDisk("jobevent"), 0u);
}

TEST_F(JobManagerFailingStoreTest, RefusedFailureReportIsRetried) {
  const uint64_t w0 = AddWorker("w0");
  AddWorker("w1");
  auto job = jobs_->Submit(Spec(2));
  jobs_->Reconcile();
  v1::Job running = *jobs_->Get(job->job_id());
  ASSERT_EQ(running.state(), v1::RUNNING);
  Commands("w0", w0);
  v1::JobFailureReport failure;
  failure.set_job_id(job->job_id());
  failure.set_generation(running.generation());
  failure.set_rank(0);
  failure.set_error("collective timed out");
  failing_->FailWrites(-1, "job");
  jobs_->OnJobFailure("w0", w0, failure);
  EXPECT_EQ(StateOf(job->job_id()), v1::RUNNING);
  EXPECT_TRUE(Commands("w0", w0).empty());
  failing_->Recover();
  jobs_->Reconcile();
  v1::Job after = *jobs_->Get(job->job_id());
  EXPECT_EQ(after.recoveries(), 1);
  EXPECT_TRUE(after.state() == v1::RECOVERING || after.generation() == 2u)
      << after.state_reason();
  auto stop = Commands("w0", w0);
  ASSERT_FALSE(stop.empty());
  EXPECT_TRUE(stop[0].has_stop_job());
}

}  // namespace
}  // namespace corescape::scheduler
