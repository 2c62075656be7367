#ifndef CORESCAPE_WORKER_JOB_RUNNER_H_
#define CORESCAPE_WORKER_JOB_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "corescape/v1/node.pb.h"
#include "runtime/attention/remote_core_attention.h"
#include "runtime/device/device.h"
#include "daemon/node_agent.h"
#include "daemon/run_metrics.h"
#include "daemon/run_supervisor.h"
#include "runtime/train/data_parallel_group.h"
#include "runtime/train/data_parallel_trainer.h"

namespace corescape::worker {

// Builds the job's core-attention executor for DISAGGREGATED and IN_PLACE
// jobs (core_attention.h); the runner keeps it so a stop can abort an
// exchange in flight, and hands it the scheduler's weights and plans.
using AttentionFactory =
    std::function<absl::StatusOr<std::shared_ptr<attention::RemoteCoreAttention>>(
        const v1::JobAssignment& assignment, const train::TrainerConfig& config)>;

// Builds the job's data-parallel group (its communicator) from an
// assignment (peers, generation, token) and the device the runner resolved
// it to train on (job::TrainingDeviceFor): a GPU job synchronizes on it.
using GroupFactory = std::function<absl::StatusOr<std::unique_ptr<train::DataParallelGroup>>(
    const v1::JobAssignment& assignment, const device::Device& training_device)>;

// The worker's side of a training job: on JobAssignment it trains its rank
// on a thread (resuming from the checkpoint the scheduler names), reports
// every step over the session (rank 0 speaks for the job), validates and
// checkpoints at the spec's intervals, and reports a failure (for example a
// collective that timed out because a peer died) so the scheduler can
// recover. StopJob — or a newer assignment — ends the current run at the
// next step boundary. DISAGGREGATED jobs survive a lost attention server: a
// step dropped because core attention failed is redone once the scheduler
// sends the same generation's next attention epoch (FailOverAttention).
class JobRunner {
 public:
  // checkpoint_root (absolute): the only tree this worker reads and writes
  // checkpoints in; an assignment whose checkpoint.directory resolves
  // outside it fails with the reason (job::CheckCheckpointDirectoryUnder).
  // data_root (absolute): the only tree it reads datasets from, checked
  // before any is opened (job::CheckDatasetsUnder).
  // attention_factory may be null: DISAGGREGATED and IN_PLACE jobs then fail
  // with a clear error. metrics (may be null) sees every rank's steps and
  // checkpoint writes; it must outlive the runner. device: what this worker
  // serves (--device): a CUDA job trains on its GPU; one it cannot train is
  // refused with the reason (job::TrainingDeviceFor), reported as the run's
  // failure.
  JobRunner(GroupFactory group_factory, int threads, std::string checkpoint_root,
            std::string data_root, AttentionFactory attention_factory = nullptr, RunMetrics* metrics = nullptr,
            v1::ServedDevice device = {}, double peak_tflops = 0);
  ~JobRunner();

  void Handle(const v1::SchedulerCommand& command, NodeAgent& agent);
  void Shutdown();

  // Builds the trainer's settings from a job assignment.
  static absl::StatusOr<train::TrainerConfig> TrainerConfigFor(
      const v1::JobAssignment& assignment, int threads);

 private:
  struct Run {
    v1::JobAssignment assignment;
    std::atomic<bool> stop{false};
    std::thread thread;
    // Set once connected, so a stop can abort a collective in flight.
    std::shared_ptr<train::DataParallelGroup> group;
    std::shared_ptr<attention::RemoteCoreAttention> attention;  // DISAGGREGATED, IN_PLACE
    // DISAGGREGATED jobs: the newest attention membership the scheduler
    // sent for this generation (highest attention_epoch). Guarded by mu_.
    v1::JobAssignment attention_membership;
    // The attention epoch of `attention`. Guarded by mu_.
    uint64_t attention_epoch = 0;
    // The newest speed weights the scheduler sent for this generation and
    // attention_membership's epoch; each executor of that epoch gets them.
    // Guarded by mu_.
    std::optional<v1::AttentionSpeedWeights> speed_weights;
  };

  // What a run trains with, once set up.
  struct TrainingSetup {
    train::TrainerConfig config;
    std::shared_ptr<train::DataParallelGroup> group;
    std::unique_ptr<train::DataParallelTrainer> trainer;
    std::string checkpoint_dir;
    int64_t checkpoint_step = -1;  // the newest checkpoint of this run's steps
    int64_t restored_step = -1;    // the checkpoint it started after (-1: none)
    // The device's dense peak at the job's precision, for MFU (0: unknown).
    double peak_tflops = 0;
  };

  // The run's thread: sets up, trains every step, and reports a failure
  // (unless the run was stopped).
  void Train(Run* run, NodeAgent* agent);
  // The trainer's settings, the data-parallel group, the core-attention
  // executor of DISAGGREGATED and IN_PLACE jobs (its epoch in
  // `attention_epoch`) and the trainer, restored from the checkpoint the
  // assignment names.
  absl::StatusOr<TrainingSetup> SetUpTraining(Run& run, uint64_t& attention_epoch)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Trains to the spec's last step: validates and checkpoints at its
  // intervals, redoes steps dropped for a lost attention server, and rank 0
  // reports every step.
  absl::Status TrainSteps(Run& run, NodeAgent& agent, TrainingSetup& setup,
                          uint64_t& attention_epoch) ABSL_LOCKS_EXCLUDED(mu_);
  static v1::NodeMessage StepReportMessage(const v1::JobAssignment& assignment,
                                           const train::StepResult& result, double validation_loss,
                                           const TrainingSetup& setup);
  // After a step or validation every rank dropped because core attention
  // failed: waits (attention_failover_timeout_ms) for the scheduler's next
  // attention epoch, connects it and gives it to the trainer; `epoch` is the
  // one in use. Without a new epoch (no server was lost) or on stop, fails
  // with `why`.
  absl::Status FailOverAttention(Run* run, train::DataParallelTrainer& trainer,
                                 const train::TrainerConfig& config, const absl::Status& why,
                                 uint64_t& epoch);
  // Keeps the scheduler's speed weights for the current run, if they are of
  // its job, generation and attention epoch with one weight per server
  // (otherwise logs why not, rate-limited), and hands them to its executor.
  void TakeSpeedWeights(const v1::AttentionSpeedWeights& weights)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // trainer.Validate() with worker 0 shipping no scheduler plans.
  absl::StatusOr<double> Validate(Run& run, train::DataParallelTrainer& trainer)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Hands the scheduler's plans of an upcoming step to the current run's
  // executor if they are for its job, generation and attention epoch and
  // this is rank 0 (otherwise logs why not, rate-limited).
  void TakeStepPlan(const v1::AttentionStepPlan& step_plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands run.speed_weights to run.attention when both are of one epoch.
  void ApplySpeedWeights(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const GroupFactory group_factory_;
  const AttentionFactory attention_factory_;
  const int threads_;
  const std::string checkpoint_root_;
  const std::string data_root_;
  RunMetrics* const metrics_;
  const v1::ServedDevice device_;
  // The operator's peak for this worker's device (0: model::DensePeakTflops).
  const double peak_tflops_;
  absl::Mutex mu_;
  RunSupervisor<Run> runs_;
};

}  // namespace corescape::worker

#endif  // CORESCAPE_WORKER_JOB_RUNNER_H_
