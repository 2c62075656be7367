#include "bench/train_throughput/timed_steps.h"

#include <memory>
#include <random>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/train/data_parallel_group.h"
#include "runtime/train/optimizer_placement.h"

namespace corescape::bench {

model::ModelBatch PackedRandomBatch(const model::ModelConfig& config, int rows, int seq,
                                    int docs_per_row, uint32_t seed) {
  model::ModelBatch batch;
  batch.batch_size = rows;
  batch.seq_len = seq;
  std::mt19937 rng(seed);
  for (int row = 0; row < rows; ++row) {
    const int length = seq / docs_per_row;
    for (int d = 0; d < docs_per_row; ++d) {
      const int start = d * length;
      const int this_length = d + 1 == docs_per_row ? seq - start : length;
      for (int i = 0; i < this_length; ++i) {
        batch.tokens.push_back(rng() % config.vocab_size);
        batch.targets.push_back(rng() % config.vocab_size);
        batch.positions.push_back(i);
      }
      kernels::AttentionTask task;
      task.q_begin = 0;
      task.q_end = this_length;
      task.q_row = task.kv_row = int64_t{row} * seq + start;
      batch.attention_tasks.push_back(task);
    }
  }
  return batch;
}

optim::OptimizerOptions PlainAdamW() {
  optim::OptimizerOptions options;
  options.name = optim::OptimizerName(optim::OptimizerKind::kAdamW);
  options.grad_clip = 0;
  return options;
}

absl::StatusOr<TimedSteps> TimeTrainingSteps(model::Transformer& model,
                                             model::CoreAttentionExecutor& attention,
                                             const model::ModelBatch& batch, int warmup,
                                             int steps, OptimizerPlacement placement,
                                             const optim::OptimizerOptions& options,
                                             bool profile_ops) {
  const int64_t n = model.layout().total_size();
  optim::DecayMask decay(n, 1);
  train::SingleProcessGroup group;
  std::unique_ptr<optim::DataParallelOptimizer> optimizer;
  const bool on_device = placement == OptimizerPlacement::kModelDevice;
  if (on_device) {
    auto placed = train::CreatePlacedOptimizer(options, &group, train::GroupUse::kOptimizerAlone,
                                               model.ops(), decay,
                                               model.layout().TensorBounds());
    if (!placed.ok()) return placed.status();
    if (!placed->on_device) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer ", options.name, ": no form with its state on ",
                       model.ops().device().ToString(), " (", placed->placement, ")"));
    }
    optimizer = std::move(placed->optimizer);
  } else {
    // A device optimizer may have run on this model before.
    if (absl::Status s = model.DownloadParameters(); !s.ok()) return s;
    auto created = optim::CreateOptimizer(options, &group, decay);
    if (!created.ok()) return created.status();
    optimizer = *std::move(created);
  }
  model::Activations activations;
  TimedSteps timed;
  absl::Duration total, compute, update;
  device::OnDemandProfiler& profile = model.ops().op_profile();
  // A step that fails leaves no profile running behind it.
  absl::Cleanup stop_profile = [&profile] {
    if (profile.active() != nullptr) (void)profile.Take();
  };
  for (int step = 0; step < warmup + steps; ++step) {
    if (profile_ops && step == warmup) {
      if (absl::Status s = profile.Start(); !s.ok()) return s;
    }
    const absl::Time start = absl::Now();
    if (absl::Status s = model.ZeroGradients(); !s.ok()) return s;
    auto loss = model.Forward(batch, attention, activations);
    if (!loss.ok()) return loss.status();
    if (absl::Status s = model.Backward(attention, activations, 1.0f / loss->tokens); !s.ok()) {
      return s;
    }
    if (absl::Status s = model.ops().Synchronize(); !s.ok()) return s;
    const absl::Time computed = absl::Now();
    if (on_device) {
      auto params = model.BackendParameters();
      if (!params.ok()) return params.status();
      auto grads = model.BackendGradients();
      if (!grads.ok()) return grads.status();
      if (absl::Status s = optimizer->Step(*params, *grads, n, 1e-4); !s.ok()) return s;
      model.MarkBackendParametersUpdated();
      if (absl::Status s = model.ops().Synchronize(); !s.ok()) return s;
    } else {
      if (absl::Status s = model.DownloadGradients(); !s.ok()) return s;
      if (absl::Status s = optimizer->Step(model.parameters().data(), model.gradients().data(), n,
                                           1e-4);
          !s.ok()) {
        return s;
      }
    }
    const absl::Time end = absl::Now();
    if (step >= warmup) {
      total += end - start;
      compute += computed - start;
      update += end - computed;
      timed.phases.AddScaled(optimizer->last_step().phases, 1.0 / steps);
    }
    timed.last_loss = loss->mean();
  }
  timed.step_seconds = absl::ToDoubleSeconds(total) / steps;
  timed.compute_seconds = absl::ToDoubleSeconds(compute) / steps;
  timed.optimizer_seconds = absl::ToDoubleSeconds(update) / steps;
  if (profile_ops) {
    auto totals = profile.Take();
    if (!totals.ok()) return totals.status();
    timed.op_profile = *std::move(totals);
    for (device::StreamProfiler::Total& total : timed.op_profile) total.milliseconds /= steps;
  }
  return timed;
}

}  // namespace corescape::bench
