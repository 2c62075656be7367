#include "tools/scape/training_rank.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/base/crc32c.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/model/model_config.h"
#include "runtime/optim/in_process_rank_group.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/train/data_parallel_trainer.h"
#include "tools/scape/timed_rank_group.h"

namespace corescape::scape_tool {
namespace {

template <typename T>
uint32_t Checksum(const std::vector<T>& values) {
  return Crc32c(values.data(), values.size() * sizeof(T));
}

}  // namespace

absl::StatusOr<train::TrainerConfig> TrainerConfigFor(const DriverConfig& config) {
  auto model_config = model::PresetConfig(config.model);
  if (!model_config.ok()) return model_config.status();
  auto kind = optim::LrSchedule::ParseKind(config.schedule);
  if (!kind.ok()) return kind.status();
  train::TrainerConfig trainer;
  trainer.model = *model_config;
  trainer.train_data = {config.data};  // its "validation" split validates
  trainer.seq_len = config.seq_len;
  trainer.micro_batch = config.micro_batch;
  trainer.grad_accum = 1;
  trainer.steps = config.steps;
  trainer.seed = config.seed;
  optim::OptimizerOptions& options = trainer.optimizer;
  options.name = config.method;
  options.adam = config.scape.adams;
  options.grad_clip = config.grad_clip;
  options.scape = config.scape;
  trainer.schedule.kind = *kind;
  trainer.schedule.peak_lr = config.lr;
  trainer.schedule.min_lr = config.min_lr;
  trainer.schedule.warmup_steps = config.lr_warmup;
  trainer.schedule.total_steps = config.steps;
  trainer.threads = 1;  // one BLAS thread and one attention thread per rank
  return trainer;
}

absl::StatusOr<RankOutcome> RunTrainingRank(
    const DriverConfig& config, optim::RankGroup& optimizer_group, optim::RankGroup& control,
    const std::function<absl::Status(const StepTrace&)>& after_step) {
  const int rank = optimizer_group.rank();
  const int world = optimizer_group.world_size();
  auto trainer_config = TrainerConfigFor(config);
  if (!trainer_config.ok()) return trainer_config.status();
  TimedRankGroup timed_group(&optimizer_group);
  TimedRankGroup timed_control(&control);
  // The production trainer: the worker's optimizer construction, clipping,
  // loss scaling and validation.
  auto created = train::DataParallelTrainer::Create(*trainer_config, &timed_group, &timed_control);
  if (!created.ok()) return created.status();
  train::DataParallelTrainer& trainer = **created;
  const int64_t n = trainer.model().layout().total_size();

  RankOutcome outcome;
  outcome.rank = rank;
  outcome.world_size = world;
  outcome.parameters = n;
  outcome.dense_bytes_per_step = optim::InProcessRankGroup::RingAllReduceBytesSent(n, world, rank);
  if (config.validate) {
    auto initial = trainer.Validate();
    if (!initial.ok()) return initial.status();
    outcome.initial_val_loss = *initial;
  }

  const absl::Time start = absl::Now();
  for (int64_t step = 0; step < config.steps; ++step) {
    const absl::Time step_start = absl::Now();
    const absl::Duration comm_before = timed_group.blocked();
    const absl::Duration control_before = timed_control.blocked();
    const int64_t sent_before = optimizer_group.bytes_sent();
    const int64_t received_before = optimizer_group.bytes_received();
    auto result = trainer.Step();
    if (!result.ok()) return result.status();
    const absl::Time step_end = absl::Now();
    const optim::OptimizerStepStats& stats = trainer.optimizer().last_step();
    StepTrace trace;
    trace.step = step + 1;
    trace.train_loss = result->loss;
    trace.lr = result->learning_rate;
    trace.dense = stats.dense;
    trace.synced_values = stats.synced_values;
    trace.bytes_sent = stats.bytes_sent;
    trace.bytes_received = stats.bytes_received;
    trace.window_bytes_sent = optimizer_group.bytes_sent() - sent_before;
    trace.window_bytes_received = optimizer_group.bytes_received() - received_before;
    trace.mask_part_bytes = stats.mask_part_bytes;
    trace.mask_encoding =
        stats.mask_part_bytes > 0 ? optim::MaskEncodingName(stats.mask_encoding) : "";
    trace.step_seconds = absl::ToDoubleSeconds(step_end - step_start);
    trace.comm_seconds = absl::ToDoubleSeconds(timed_group.blocked() - comm_before);
    trace.control_seconds = absl::ToDoubleSeconds(timed_control.blocked() - control_before);
    trace.elapsed_seconds = absl::ToDoubleSeconds(step_end - start);
    const bool last = step + 1 == config.steps;
    if (config.validate &&
        (last || (config.eval_interval > 0 && (step + 1) % config.eval_interval == 0))) {
      auto v = trainer.Validate();
      if (!v.ok()) return v.status();
      trace.val_loss = *v;
      outcome.final_val_loss = *v;
    }
    outcome.steps.push_back(trace);
    if (!std::isfinite(trace.train_loss)) {
      return absl::InternalError(absl::StrCat("diverged at step ", step + 1));
    }
    if (after_step) {
      if (absl::Status s = after_step(trace); !s.ok()) return s;
    }
  }
  outcome.seconds = absl::ToDoubleSeconds(absl::Now() - start);

  // SaveState waits for an in-flight mask exchange, so no collective of this
  // rank is pending when the group goes away.
  optim::DataParallelOptimizer& optimizer = trainer.optimizer();
  if (auto saved = optimizer.SaveState(); !saved.ok()) return saved.status();
  if (absl::Status s = trainer.DownloadParameters(); !s.ok()) return s;
  outcome.parameters_crc32c = Checksum(trainer.model().parameters());
  outcome.first_moment_crc32c = Checksum(optimizer.first_moment());
  if (auto* scape = dynamic_cast<optim::ScapeOptimizer*>(&optimizer)) {
    outcome.has_residual = true;
    outcome.residual_crc32c = Checksum(scape->residual());
    outcome.last_sync_crc32c = Checksum(scape->last_sync());
    const int64_t first_sparse = scape->config().WarmupSteps();
    int64_t covered = 0;
    double age = 0, residual = 0, momentum = 0;
    for (int64_t j = 0; j < n; ++j) {
      covered += scape->last_sync()[j] >= first_sparse;
      age += static_cast<double>(config.steps - 1 - scape->last_sync()[j]);
      residual += double{scape->residual()[j]} * scape->residual()[j];
      momentum += double{scape->first_moment()[j]} * scape->first_moment()[j];
    }
    outcome.coverage = static_cast<double>(covered) / n;
    outcome.mean_age = age / n;
    outcome.residual_to_momentum = std::sqrt(residual / std::max(momentum, 1e-30));
  }
  return outcome;
}

}  // namespace corescape::scape_tool
