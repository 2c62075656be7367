#include "worker/job_runner.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "runtime/base/crc32c.h"
#include "runtime/checkpoint/checkpoint.h"
#include "daemon/job_failure_report.h"
#include "runtime/job/job_device.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/trainer_config.h"
#include "runtime/model/model_config.h"
#include "runtime/model/peak_flops.h"
#include "worker/attention_reports.h"

namespace corescape::worker {

JobRunner::JobRunner(GroupFactory group_factory, int threads, std::string checkpoint_root,
                     std::string data_root, AttentionFactory attention_factory, RunMetrics* metrics,
                     v1::ServedDevice device, double peak_tflops)
    : group_factory_(std::move(group_factory)),
      attention_factory_(std::move(attention_factory)),
      threads_(threads),
      checkpoint_root_(std::move(checkpoint_root)),
      data_root_(std::move(data_root)),
      metrics_(metrics),
      device_(std::move(device)),
      peak_tflops_(peak_tflops),
      runs_(mu_, "job", [](Run& run, const std::string& reason) {
        if (run.group != nullptr) run.group->Abort(reason);
        if (run.attention != nullptr) run.attention->Abort(reason);
      }) {}

JobRunner::~JobRunner() { Shutdown(); }

absl::StatusOr<train::TrainerConfig> JobRunner::TrainerConfigFor(
    const v1::JobAssignment& assignment, int threads) {
  return job::TrainerConfigForAssignment(assignment, threads);
}

void JobRunner::TakeSpeedWeights(const v1::AttentionSpeedWeights& weights) {
  Run* current = runs_.current();
  std::string why;
  if (current == nullptr || current->assignment.job_id() != weights.job_id()) {
    why = "not running that job";
  } else if (current->assignment.generation() != weights.generation()) {
    why = absl::StrCat("running generation ", current->assignment.generation());
  } else if (current->attention_membership.attention_epoch() != weights.attention_epoch()) {
    why = absl::StrCat("in attention epoch ", current->attention_membership.attention_epoch());
  } else if (weights.weights_size() !=
             current->attention_membership.attention_server_addresses_size()) {
    why = absl::StrCat(weights.weights_size(), " weights for ",
                       current->attention_membership.attention_server_addresses_size(),
                       " attention servers");
  }
  if (!why.empty()) {
    // A late push (the run moved on) is harmless; a flood of them is noise.
    LOG_EVERY_N(WARNING, 20) << "ignoring attention speed weights version " << weights.version()
                             << " of job " << weights.job_id() << " generation "
                             << weights.generation() << " attention epoch "
                             << weights.attention_epoch() << ": " << why;
    return;
  }
  current->speed_weights = weights;
  ApplySpeedWeights(*current);
}

void JobRunner::TakeStepPlan(const v1::AttentionStepPlan& step_plan) {
  Run* current = runs_.current();
  std::string why;
  if (current == nullptr || current->assignment.job_id() != step_plan.job_id()) {
    why = "not running that job";
  } else if (current->assignment.generation() != step_plan.generation()) {
    why = absl::StrCat("running generation ", current->assignment.generation());
  } else if (current->attention == nullptr ||
             current->attention_epoch != step_plan.attention_epoch()) {
    // Planned over another epoch's servers: the executor could not use it.
    why = absl::StrCat("in attention epoch ", current->attention_epoch);
  } else if (current->assignment.rank() != 0) {
    why = "only worker rank 0 ships plans";
  }
  absl::StatusOr<std::vector<attention::ShippedPlan>> plans =
      why.empty() ? ShippedPlansFromStepPlan(
                        step_plan, current->attention_membership.peer_data_addresses_size(),
                        current->attention_membership.attention_server_addresses_size())
                  : absl::FailedPreconditionError(why);
  if (!plans.ok()) {
    // A late plan (the run moved on) is harmless: the step is planned here.
    LOG_EVERY_N(WARNING, 20) << "ignoring the attention plan of step " << step_plan.step()
                             << " of job " << step_plan.job_id() << " generation "
                             << step_plan.generation() << " attention epoch "
                             << step_plan.attention_epoch() << ": " << plans.status().message();
    return;
  }
  for (attention::ShippedPlan& plan : *plans) {
    if (absl::Status s = current->attention->OfferShippedPlan(std::move(plan)); !s.ok()) {
      LOG_EVERY_N(WARNING, 20) << "job " << step_plan.job_id()
                               << ": attention plan refused: " << s;
      return;
    }
  }
}

void JobRunner::ApplySpeedWeights(Run& run) {
  if (run.attention == nullptr || !run.speed_weights ||
      run.speed_weights->attention_epoch() != run.attention_epoch) {
    return;  // the executor of its epoch takes them once it exists
  }
  attention::VersionedSpeedWeights weights;
  weights.version = run.speed_weights->version();
  weights.weights.assign(run.speed_weights->weights().begin(),
                         run.speed_weights->weights().end());
  if (absl::Status s = run.attention->SetSpeedWeights(std::move(weights)); !s.ok()) {
    LOG_EVERY_N(WARNING, 20) << "job " << run.assignment.job_id()
                             << ": attention speed weights refused: " << s;
  }
}

void JobRunner::Handle(const v1::SchedulerCommand& command, NodeAgent& agent) {
  absl::MutexLock lock(&mu_);
  if (command.has_attention_weights()) {
    TakeSpeedWeights(command.attention_weights());
    return;
  }
  if (command.has_attention_step_plan()) {
    TakeStepPlan(command.attention_step_plan());
    return;
  }
  if (command.has_stop_job()) {
    runs_.Stop(command.stop_job());
    return;
  }
  if (!command.has_assign()) return;
  const v1::JobAssignment& assign = command.assign();
  Run* current = runs_.current();
  if (current != nullptr && current->assignment.job_id() == assign.job_id() &&
      current->assignment.generation() == assign.generation()) {
    if (assign.attention_epoch() > current->attention_membership.attention_epoch()) {
      // Re-planned over other attention servers: the run goes on. An
      // exchange in flight fails now rather than at a timeout; the trainer
      // then redoes the step in the new epoch.
      LOG(INFO) << "job " << assign.job_id() << ": attention epoch " << assign.attention_epoch()
                << " over " << assign.attention_server_addresses_size() << " servers";
      current->attention_membership = assign;
      if (current->attention != nullptr) {
        current->attention->Abort(
            absl::StrCat("attention epoch ", assign.attention_epoch(), " replaces this one"));
      }
    }
    return;  // otherwise redelivered
  }
  if (assign.attention_epoch() > 0) {
    // Re-plans never start a run: this worker lost the job's run (it is
    // recovering and will get a new generation).
    LOG(WARNING) << "ignoring attention epoch " << assign.attention_epoch() << " of job "
                 << assign.job_id() << " generation " << assign.generation()
                 << ": not running it";
    return;
  }
  runs_.StopCurrent(
      absl::StrCat("superseded by job ", assign.job_id(), " generation ", assign.generation()));
  auto run = std::make_unique<Run>();
  run->assignment = assign;
  run->attention_membership = assign;
  LOG(INFO) << "job " << assign.job_id() << " generation " << assign.generation() << ": rank "
            << assign.rank() << " of " << assign.world_size()
            << (assign.resume_from_step() >= 0
                    ? absl::StrCat(", resuming from step ", assign.resume_from_step())
                    : std::string(", from the start"));
  NodeAgent* agent_ptr = &agent;
  runs_.Start(std::move(run), [this, agent_ptr](Run* started) { Train(started, agent_ptr); });
}

void JobRunner::Train(Run* run, NodeAgent* agent) {
  const v1::JobAssignment& assignment = run->assignment;
  uint64_t attention_epoch = 0;  // of the attention communicator in use
  // Released when this run ends (the executor then tells the attention
  // servers the job is done), not when the next assignment replaces the run.
  struct ReleaseAttention {
    JobRunner* runner;
    Run* run;
    ~ReleaseAttention() {
      std::shared_ptr<attention::RemoteCoreAttention> attention;
      absl::MutexLock lock(&runner->mu_);
      attention.swap(run->attention);
    }
  } release_attention{this, run};
  absl::Status status = [&]() -> absl::Status {
    auto setup = SetUpTraining(*run, attention_epoch);
    if (!setup.ok()) return setup.status();
    absl::Status trained = TrainSteps(*run, *agent, *setup, attention_epoch);
    // The trainer joins a collective still in flight (a mask exchange's)
    // when it goes: a failed run's ends now, not at a dead peer's timeout.
    if (!trained.ok()) setup->group->Abort(absl::StrCat("this rank failed: ", trained.message()));
    return trained;
  }();
  if (status.ok()) return;
  if (run->stop) {
    LOG(INFO) << "job " << assignment.job_id() << " stopped: " << status;
    return;
  }
  LOG(ERROR) << "job " << assignment.job_id() << " rank " << assignment.rank()
             << " failed: " << status;
  agent->Send(JobFailureMessage(assignment, status, attention_epoch));
}

absl::StatusOr<JobRunner::TrainingSetup> JobRunner::SetUpTraining(Run& run,
                                                                  uint64_t& attention_epoch) {
  const v1::JobAssignment& assignment = run.assignment;
  const v1::JobSpec& spec = assignment.spec();
  // Refused before connecting anything: the scheduler hears why at once.
  auto training_device = job::TrainingDeviceFor(assignment.job_id(), spec, device_);
  if (!training_device.ok()) return training_device.status();
  if (!spec.checkpoint().directory().empty()) {
    if (absl::Status s =
            job::CheckCheckpointDirectoryUnder(spec.checkpoint().directory(), checkpoint_root_);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = job::CheckDatasetsUnder(spec.data(), data_root_); !s.ok()) return s;
  TrainingSetup setup;
  auto config = TrainerConfigFor(assignment, threads_);
  if (!config.ok()) return config.status();
  setup.config = *std::move(config);
  setup.config.device = training_device->device;
  setup.config.precision = training_device->precision;
  setup.peak_tflops = job::MfuPeakTflops(device_, *training_device, peak_tflops_);
  LOG(INFO) << "job " << assignment.job_id() << " on " << training_device->device.ToString()
            << ": MFU "
            << (setup.peak_tflops > 0
                    ? absl::StrCat("against a dense peak of ", setup.peak_tflops, " TFLOP/s (",
                                   peak_tflops_ > 0 ? "--peak_tflops" : device_.gpu_model(), ", ",
                                   model::PrecisionName(setup.config.precision), ")")
                    : std::string("unknown: no peak for this device (--peak_tflops gives one)"));
  auto created_group = group_factory_(assignment, training_device->device);
  if (!created_group.ok()) return created_group.status();
  setup.group = *std::move(created_group);
  {
    absl::MutexLock lock(&mu_);
    run.group = setup.group;
    if (run.stop) setup.group->Abort("stop requested");
  }
  const bool disaggregated = spec.attention().mode() == v1::DISAGGREGATED;
  // IN_PLACE jobs get an executor too (the workers serve each other's
  // attention) but no failover: a lost worker is a recovery.
  if (disaggregated || spec.attention().mode() == v1::IN_PLACE) {
    if (attention_factory_ == nullptr) {
      return absl::UnimplementedError(absl::StrCat("this worker cannot run ",
                                                   v1::AttentionMode_Name(spec.attention().mode()),
                                                   " attention"));
    }
    // The newest membership: a re-plan may have come before we connected.
    v1::JobAssignment membership;
    {
      absl::MutexLock lock(&mu_);
      membership = run.attention_membership;
    }
    attention_epoch = membership.attention_epoch();
    auto attention = attention_factory_(membership, setup.config);
    if (!attention.ok()) return attention.status();
    LOG(INFO) << "job " << membership.job_id() << " rank " << membership.rank()
              << ": core attention "
              << (disaggregated ? absl::StrCat("on ", membership.attention_server_addresses_size(),
                                               " attention server(s)")
                                : absl::StrCat("in place over ",
                                               membership.peer_data_addresses_size(), " workers"))
              << ", " << (setup.config.ping_pong ? "ping-pong halves" : "whole micro-batches");
    {
      absl::MutexLock lock(&mu_);
      run.attention = *attention;
      run.attention_epoch = attention_epoch;
      ApplySpeedWeights(run);
      if (run.stop) run.attention->Abort("stop requested");
    }
    setup.config.attention = *std::move(attention);
  }
  auto trainer = train::DataParallelTrainer::Create(setup.config, setup.group.get());
  if (!trainer.ok()) return trainer.status();
  setup.trainer = *std::move(trainer);
  setup.config.attention.reset();  // the trainer and the run hold it
  // Per job: two jobs given the same directory never see each other's steps.
  setup.checkpoint_dir = absl::StrCat(spec.checkpoint().directory(), "/", assignment.job_id());
  if (assignment.resume_from_step() >= 0) {
    auto checkpoint =
        checkpoint::LoadNewestCheckpoint(setup.checkpoint_dir, assignment.resume_from_step());
    if (!checkpoint.ok()) return checkpoint.status();
    if (absl::Status s = setup.trainer->Restore(*checkpoint); !s.ok()) return s;
    setup.checkpoint_step = checkpoint->step;
    setup.restored_step = checkpoint->step;
    LOG(INFO) << "restored checkpoint step " << checkpoint->step << " from "
              << setup.checkpoint_dir;
  }
  return setup;
}

absl::Status JobRunner::TrainSteps(Run& run, NodeAgent& agent, TrainingSetup& setup,
                                   uint64_t& attention_epoch) {
  const v1::JobAssignment& assignment = run.assignment;
  const v1::JobSpec& spec = assignment.spec();
  train::DataParallelTrainer& trainer = *setup.trainer;
  const bool disaggregated = spec.attention().mode() == v1::DISAGGREGATED;
  const bool reporter = assignment.rank() == 0;
  const int64_t eval_interval = spec.eval_interval_steps();
  const int64_t checkpoint_interval = spec.checkpoint().interval_steps();
  // DISAGGREGATED jobs: the scheduler plans each step's core attention
  // while the step before runs.
  AttentionDemandLookahead demands(assignment,
                                   [&agent](v1::NodeMessage m) { agent.Send(std::move(m)); });
  const AttentionDemandLookahead::Peek peek = [&trainer](int64_t steps_ahead) {
    return trainer.UpcomingAttentionDocuments(steps_ahead);
  };
  while (trainer.step() < spec.steps()) {
    if (run.stop) return absl::CancelledError("stop requested");
    if (disaggregated) demands.BeforeStep(trainer.step(), attention_epoch, peek);
    auto result = trainer.Step();
    if (!result.ok() && disaggregated && train::IsDiscardedForAttention(result.status())) {
      // Every rank dropped the step: redo it in the next attention epoch.
      if (absl::Status s =
              FailOverAttention(&run, trainer, setup.config, result.status(), attention_epoch);
          !s.ok()) {
        return s;
      }
      continue;
    }
    if (!result.ok()) return result.status();
    if (!std::isfinite(result->loss)) {
      return absl::InternalError(
          absl::StrCat("loss is ", result->loss, " at step ", result->step, ": training diverged"));
    }
    const int64_t step = result->step;
    double validation_loss = std::numeric_limits<double>::quiet_NaN();
    if ((eval_interval > 0 && step % eval_interval == 0) || step == spec.steps()) {
      auto val = Validate(run, trainer);
      while (!val.ok() && disaggregated && train::IsDiscardedForAttention(val.status())) {
        if (absl::Status s =
                FailOverAttention(&run, trainer, setup.config, val.status(), attention_epoch);
            !s.ok()) {
          return s;
        }
        val = Validate(run, trainer);
      }
      if (val.ok()) {
        validation_loss = *val;
      } else if (val.status().code() != absl::StatusCode::kFailedPrecondition) {
        return val.status();  // no validation data is fine; errors are not
      }
    }
    if (checkpoint_interval > 0 && step % checkpoint_interval == 0 && step < spec.steps()) {
      // Rank 0 writes for everyone: the replicas are bitwise identical.
      if (reporter) {
        const absl::Time write_start = absl::Now();
        auto snapshot = trainer.Snapshot();
        if (!snapshot.ok()) return snapshot.status();
        if (absl::Status s = checkpoint::WriteCheckpoint(setup.checkpoint_dir, *snapshot,
                                                         spec.checkpoint().keep());
            !s.ok()) {
          return s;
        }
        if (metrics_ != nullptr) {
          metrics_->ObserveCheckpoint(assignment.job_id(),
                                      absl::ToDoubleSeconds(absl::Now() - write_start));
        }
      }
      setup.checkpoint_step = step;
    }
    if (reporter || metrics_ != nullptr) {
      v1::NodeMessage report =
          StepReportMessage(assignment, *result, validation_loss, setup);
      if (metrics_ != nullptr) {
        metrics_->ObserveStep(report.step_report(), result->density, result->mask_bytes);
      }
      if (reporter) agent.Send(std::move(report));
    }
  }
  // Replicas must agree bitwise; the checksum in the log lets anyone compare.
  if (absl::Status s = trainer.DownloadParameters(); !s.ok()) return s;
  const std::vector<float>& params = trainer.model().parameters();
  LOG(INFO) << "job " << assignment.job_id() << " rank " << assignment.rank() << " finished "
            << spec.steps() << " steps; parameter crc32c "
            << absl::StrFormat("%08x", Crc32c(params.data(), params.size() * sizeof(float)));
  return absl::OkStatus();
}

v1::NodeMessage JobRunner::StepReportMessage(const v1::JobAssignment& assignment,
                                             const train::StepResult& result,
                                             double validation_loss,
                                             const TrainingSetup& setup) {
  v1::NodeMessage message;
  v1::StepReport* report = message.mutable_step_report();
  report->set_job_id(assignment.job_id());
  report->set_generation(assignment.generation());
  report->set_rank(assignment.rank());
  report->set_step(result.step);
  report->set_loss(result.loss);
  report->set_tokens_per_second(result.tokens_per_second * assignment.world_size());
  report->set_bytes_sent(result.bytes_sent);
  report->set_bytes_received(result.bytes_received);
  report->set_compute_seconds(result.compute_seconds);
  report->set_communication_seconds(result.communication_seconds);
  report->set_validation_loss(validation_loss);
  report->set_checkpoint_step(setup.checkpoint_step);
  report->set_restored_checkpoint_step(setup.restored_step);
  const double tflops = model::ModelTflopsPerSecond(
      result.model_flops, result.compute_seconds + result.communication_seconds);
  report->set_model_tflops_per_second(tflops);
  report->set_mfu(model::Mfu(tflops, setup.peak_tflops));
  return message;
}

absl::StatusOr<double> JobRunner::Validate(Run& run, train::DataParallelTrainer& trainer) {
  // The scheduler plans training steps only: a validation micro-batch must
  // not take (and be refused) a plan that matches worker 0's lengths alone.
  auto ship_plans = [&](bool on) {
    absl::MutexLock lock(&mu_);
    if (run.attention != nullptr) run.attention->ShipSchedulerPlans(on);
  };
  ship_plans(false);
  absl::StatusOr<double> loss = trainer.Validate();
  ship_plans(true);
  return loss;
}

absl::Status JobRunner::FailOverAttention(Run* run, train::DataParallelTrainer& trainer,
                                          const train::TrainerConfig& config,
                                          const absl::Status& why, uint64_t& epoch) {
  const v1::JobAssignment& assignment = run->assignment;
  // The scheduler re-plans within a lease of a server's death; a failure
  // with no re-plan behind it (no server was lost) is reported after this.
  const absl::Duration timeout = AttentionFailoverTimeout(assignment);
  LOG(WARNING) << "job " << assignment.job_id() << " rank " << assignment.rank() << ": "
               << why.message() << "; waiting up to " << absl::FormatDuration(timeout)
               << " for a new attention epoch";
  absl::Status last = why;
  for (;;) {
    v1::JobAssignment membership;
    std::shared_ptr<attention::RemoteCoreAttention> broken;
    {
      absl::MutexLock lock(&mu_);
      auto newer = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return run->stop.load() || run->attention_membership.attention_epoch() > epoch;
      };
      mu_.AwaitWithTimeout(absl::Condition(&newer), timeout);
      if (run->stop) return absl::CancelledError("stop requested");
      if (run->attention_membership.attention_epoch() <= epoch) {
        return absl::Status(last.code(),
                            absl::StrCat(last.message(), "; no new attention epoch within ",
                                         absl::FormatDuration(timeout)));
      }
      membership = run->attention_membership;
      broken.swap(run->attention);
    }
    LOG(INFO) << "job " << assignment.job_id() << " rank " << assignment.rank()
              << ": joining attention epoch " << membership.attention_epoch() << " ("
              << membership.attention_server_addresses_size() << " servers)";
    auto attention = attention_factory_(membership, config);
    // Tried, even if it failed: another server may have gone meanwhile, and
    // only a newer epoch can help.
    epoch = membership.attention_epoch();
    if (!attention.ok()) {
      last = attention.status();
      LOG(WARNING) << "cannot join attention epoch " << epoch << ": " << last;
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      run->attention = *attention;
      run->attention_epoch = epoch;
      ApplySpeedWeights(*run);
      if (run->stop) run->attention->Abort("stop requested");
      if (run->attention_membership.attention_epoch() > epoch) {
        run->attention->Abort("a newer attention epoch came while connecting");
      }
    }
    return trainer.SetAttention(*std::move(attention));
  }
}

void JobRunner::Shutdown() { runs_.Shutdown("worker shutting down"); }

}  // namespace corescape::worker
