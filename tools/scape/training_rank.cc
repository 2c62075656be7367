#include "tools/scape/training_rank.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/base/crc32c.h"
#include "runtime/base/thread_pool.h"
#include "runtime/data/batch_loader.h"
#include "runtime/model/transformer.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/in_process_rank_group.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/train/model_batch.h"
#include "tools/scape/timed_rank_group.h"

namespace corescape::scape_tool {
namespace {

using optim::RankGroup;

absl::StatusOr<std::unique_ptr<optim::DataParallelOptimizer>> MakeOptimizer(
    const DriverConfig& config, RankGroup* group, optim::DecayMask decay_mask) {
  optim::OptimizerOptions options;
  options.name = config.method;
  options.adam = config.scape.adams;
  // The formulation search compares the optimizers' own steps, unclipped.
  options.grad_clip = 0;
  options.scape = config.scape;
  return optim::CreateOptimizer(options, group, std::move(decay_mask));
}

// Σ over ranks of (loss_sum, tokens) on the validation split: rank r
// evaluates its share of the one deterministic pass.
absl::StatusOr<double> Evaluate(model::Transformer& model, data::BatchLoader& loader,
                                model::CoreAttentionExecutor& attention, RankGroup& control) {
  if (absl::Status s = loader.Seek(0); !s.ok()) return s;
  model::Activations activations;
  double loss_sum = 0.0;
  int64_t tokens = 0;
  while (std::optional<data::PackedBatch> packed = loader.Next()) {
    auto loss = model.Forward(train::ToModelBatch(*packed), attention, activations);
    if (!loss.ok()) return loss.status();
    loss_sum += loss->loss_sum;
    tokens += loss->tokens;
  }
  // Two floats per rank: tokens < 2^24 are exact; the loss sum to ~1e-7.
  float totals[2] = {static_cast<float>(loss_sum), static_cast<float>(tokens)};
  if (absl::Status s = control.AllReduceSum(totals, 2); !s.ok()) return s;
  if (totals[1] <= 0) return absl::FailedPreconditionError("validation split has no tokens");
  return double{totals[0]} / totals[1];
}

template <typename T>
uint32_t Checksum(const std::vector<T>& values) {
  return Crc32c(values.data(), values.size() * sizeof(T));
}

optim::DecayMask MatrixDecayMask(const model::Transformer& model) {
  optim::DecayMask mask(model.layout().total_size(), 0);
  for (const model::TensorSlot& slot : model.layout().tensors()) {
    if (slot.is_matrix) {
      std::fill(mask.begin() + slot.offset, mask.begin() + slot.offset + slot.size, 1);
    }
  }
  return mask;
}

}  // namespace

absl::StatusOr<TrainingData> OpenTrainingData(const std::string& dataset_dir) {
  TrainingData data;
  auto manifest = data::ReadManifest(dataset_dir);
  if (!manifest.ok()) return manifest.status();
  data.manifest = *std::move(manifest);
  auto train = data::OpenDatasetSplit(dataset_dir, "train");
  if (!train.ok()) return train.status();
  data.train = *std::move(train);
  auto validation = data::OpenDatasetSplit(dataset_dir, "validation");
  if (!validation.ok()) return validation.status();
  data.validation = *std::move(validation);
  return data;
}

absl::StatusOr<RankOutcome> RunTrainingRank(
    const DriverConfig& config, const TrainingData& data, optim::RankGroup& optimizer_group,
    optim::RankGroup& control, const std::function<absl::Status(const StepTrace&)>& after_step) {
  const int rank = optimizer_group.rank();
  const int world = optimizer_group.world_size();
  if (control.rank() != rank || control.world_size() != world) {
    return absl::InvalidArgumentError("the optimizer and control groups disagree on rank/size");
  }
  auto model_config = model::PresetConfig(config.model);
  if (!model_config.ok()) return model_config.status();
  auto kind = optim::LrSchedule::ParseKind(config.schedule);
  if (!kind.ok()) return kind.status();
  optim::LrSchedule schedule;
  schedule.kind = *kind;
  schedule.peak_lr = config.lr;
  schedule.min_lr = config.min_lr;
  schedule.warmup_steps = config.lr_warmup;
  schedule.total_steps = config.steps;

  data::BatchLoaderOptions options;
  options.seq_len = config.seq_len;
  options.micro_batch_size = config.micro_batch;
  options.rank = rank;
  options.world_size = world;
  options.seed = config.seed;
  options.eos_id = data.manifest.eos_id;
  options.pad_id = data.manifest.pad_id;
  auto train_loader = data::BatchLoader::Create(data.train, options);
  if (!train_loader.ok()) return train_loader.status();
  auto val_loader = data::BatchLoader::CreateValidation(data.validation, options);
  if (!val_loader.ok()) return val_loader.status();

  // One BLAS thread and one attention thread per rank.
  openblas_set_num_threads(1);
  ThreadPool pool(1);
  model::LocalCoreAttention attention(&pool);
  auto created = model::Transformer::Create(*model_config);
  if (!created.ok()) return created.status();
  model::Transformer& model = *created;
  model.InitializeWeights(config.seed);
  const int64_t n = model.layout().total_size();

  TimedRankGroup timed_group(&optimizer_group);
  TimedRankGroup timed_control(&control);
  auto optimizer = MakeOptimizer(config, &timed_group, MatrixDecayMask(model));
  if (!optimizer.ok()) return optimizer.status();

  RankOutcome outcome;
  outcome.rank = rank;
  outcome.world_size = world;
  outcome.parameters = n;
  outcome.dense_bytes_per_step = optim::InProcessRankGroup::RingAllReduceBytesSent(n, world, rank);
  if (config.validate) {
    auto initial = Evaluate(model, **val_loader, attention, control);
    if (!initial.ok()) return initial.status();
    outcome.initial_val_loss = *initial;
  }

  model::Activations activations;
  const absl::Time start = absl::Now();
  for (int64_t step = 0; step < config.steps; ++step) {
    const absl::Time step_start = absl::Now();
    const absl::Duration comm_before = timed_group.blocked();
    const absl::Duration control_before = timed_control.blocked();
    const int64_t sent_before = optimizer_group.bytes_sent();
    const int64_t received_before = optimizer_group.bytes_received();
    std::optional<data::PackedBatch> packed = (*train_loader)->Next();
    if (!packed) return absl::InternalError("training loader ran dry");
    const model::ModelBatch batch = train::ToModelBatch(*packed);
    float tokens = 0;
    for (int32_t t : batch.targets) tokens += t >= 0;
    model.ZeroGradients();
    auto loss = model.Forward(batch, attention, activations);
    if (!loss.ok()) return loss.status();
    // grad_scale = 1 / tokens of the GLOBAL batch: ranks' gradients sum to the mean's.
    float totals[2] = {static_cast<float>(loss->loss_sum), tokens};
    if (absl::Status s = timed_control.AllReduceSum(totals, 2); !s.ok()) return s;
    if (absl::Status s =
            model.Backward(attention, activations, 1.0f / std::max(1.0f, totals[1]));
        !s.ok()) {
      return s;
    }
    const double lr = schedule.At(step);
    if (absl::Status s =
            (*optimizer)->Step(model.parameters().data(), model.gradients().data(), n, lr);
        !s.ok()) {
      return s;
    }
    const absl::Time step_end = absl::Now();
    const optim::OptimizerStepStats& stats = (*optimizer)->last_step();
    StepTrace trace;
    trace.step = step + 1;
    trace.train_loss = double{totals[0]} / std::max(1.0f, totals[1]);
    trace.lr = lr;
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
      auto v = Evaluate(model, **val_loader, attention, control);
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
  if (auto saved = (*optimizer)->SaveState(); !saved.ok()) return saved.status();
  outcome.parameters_crc32c = Checksum(model.parameters());
  outcome.first_moment_crc32c = Checksum((*optimizer)->first_moment());
  if (auto* scape = dynamic_cast<optim::ScapeOptimizer*>(optimizer->get())) {
    outcome.has_residual = true;
    outcome.residual_crc32c = Checksum(scape->residual());
    outcome.last_sync_crc32c = Checksum(scape->last_sync());
    const int64_t first_sparse = std::max<int64_t>(1, config.scape.dense_warmup_steps);
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
