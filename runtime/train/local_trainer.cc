#include "runtime/train/local_trainer.h"

#include <cblas.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "runtime/base/thread_pool.h"
#include "runtime/data/batch_loader.h"
#include "runtime/data/dataset_manifest.h"
#include "runtime/data/shard_set.h"
#include "runtime/model/transformer.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/train/model_batch.h"

namespace corescape::train {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// Mean validation loss over the whole split (or its first max_batches).
absl::StatusOr<double> Evaluate(model::Transformer& model, data::BatchLoader& loader,
                                int64_t max_batches, model::CoreAttentionExecutor& attention) {
  if (absl::Status s = loader.Seek(0); !s.ok()) return s;
  model::Activations activations;
  double loss_sum = 0.0;
  int64_t tokens = 0;
  for (int64_t batches = 0; max_batches <= 0 || batches < max_batches; ++batches) {
    std::optional<data::PackedBatch> packed = loader.Next();
    if (!packed) break;
    auto loss = model.Forward(ToModelBatch(*packed), attention, activations);
    if (!loss.ok()) return loss.status();
    loss_sum += loss->loss_sum;
    tokens += loss->tokens;
  }
  if (tokens == 0) return absl::FailedPreconditionError("validation split has no tokens");
  return loss_sum / tokens;
}

}  // namespace

absl::Status LocalTrainConfig::Validate() const {
  if (auto preset = model::PresetConfig(model); !preset.ok()) return preset.status();
  if (data.empty()) return Invalid("data", "required: a directory from `corescape data prepare`");
  if (seq_len <= 0) return Invalid("seq_len", "must be positive");
  if (micro_batch <= 0) return Invalid("micro_batch", "must be positive");
  if (grad_accum <= 0) return Invalid("grad_accum", "must be positive");
  if (steps <= 0) return Invalid("steps", "must be positive");
  if (!(lr > 0 && lr < 10)) return Invalid("lr", "must be in (0, 10)");
  if (!(min_lr >= 0 && min_lr <= lr)) return Invalid("min_lr", "must be in [0, lr]");
  if (warmup < 0) return Invalid("warmup", "must not be negative");
  if (auto kind = optim::LrSchedule::ParseKind(schedule); !kind.ok()) return kind.status();
  if (!(weight_decay >= 0 && weight_decay < 1)) return Invalid("weight_decay", "must be in [0, 1)");
  if (!(beta1 >= 0 && beta1 < 1)) return Invalid("beta1", "must be in [0, 1)");
  if (!(beta2 >= 0 && beta2 < 1)) return Invalid("beta2", "must be in [0, 1)");
  if (!(epsilon > 0)) return Invalid("epsilon", "must be positive");
  if (!(grad_clip >= 0)) return Invalid("grad_clip", "must not be negative (0 disables)");
  if (eval_interval < 0) return Invalid("eval_interval", "must not be negative");
  if (eval_batches < 0) return Invalid("eval_batches", "must not be negative");
  if (threads < 0 || threads > 1024) return Invalid("threads", "must be in [0, 1024]");
  auto preset = model::PresetConfig(model);
  if (seq_len > preset->max_seq_len) {
    return Invalid("seq_len", absl::StrCat("exceeds the model's max_seq_len ",
                                           preset->max_seq_len));
  }
  return absl::OkStatus();
}

absl::StatusOr<LocalTrainConfig> ParseLocalTrainConfig(absl::string_view text,
                                                       const LocalTrainConfig& base,
                                                       const std::string& source) {
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  LocalTrainConfig config = base;
  for (auto it = json.begin(); it != json.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& value = *it;
    auto wrong_type = [&](const char* expected) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": ", key, ": expected ", expected));
    };
    auto read_string = [&](std::string& out) -> absl::Status {
      if (!value.is_string()) return wrong_type("a string");
      out = value.get<std::string>();
      return absl::OkStatus();
    };
    auto read_int = [&](auto& out) -> absl::Status {
      if (!value.is_number_integer()) return wrong_type("an integer");
      out = value.get<std::remove_reference_t<decltype(out)>>();
      return absl::OkStatus();
    };
    auto read_double = [&](double& out) -> absl::Status {
      if (!value.is_number()) return wrong_type("a number");
      out = value.get<double>();
      return absl::OkStatus();
    };
    absl::Status status;
    if (key == "model") status = read_string(config.model);
    else if (key == "data") status = read_string(config.data);
    else if (key == "seq_len") status = read_int(config.seq_len);
    else if (key == "micro_batch") status = read_int(config.micro_batch);
    else if (key == "grad_accum") status = read_int(config.grad_accum);
    else if (key == "steps") status = read_int(config.steps);
    else if (key == "lr") status = read_double(config.lr);
    else if (key == "min_lr") status = read_double(config.min_lr);
    else if (key == "warmup") status = read_int(config.warmup);
    else if (key == "schedule") status = read_string(config.schedule);
    else if (key == "weight_decay") status = read_double(config.weight_decay);
    else if (key == "beta1") status = read_double(config.beta1);
    else if (key == "beta2") status = read_double(config.beta2);
    else if (key == "epsilon") status = read_double(config.epsilon);
    else if (key == "grad_clip") status = read_double(config.grad_clip);
    else if (key == "eval_interval") status = read_int(config.eval_interval);
    else if (key == "eval_batches") status = read_int(config.eval_batches);
    else if (key == "seed") status = read_int(config.seed);
    else if (key == "threads") status = read_int(config.threads);
    else if (key == "metrics_out") status = read_string(config.metrics_out);
    else return absl::InvalidArgumentError(absl::StrCat(source, ": unknown key '", key, "'"));
    if (!status.ok()) return status;
  }
  return config;
}

absl::StatusOr<LocalTrainSummary> RunLocalTraining(
    const LocalTrainConfig& config, const std::function<void(const StepMetrics&)>& on_step) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  auto manifest = data::ReadManifest(config.data);
  if (!manifest.ok()) return manifest.status();
  auto model_config = model::PresetConfig(config.model);
  if (manifest->vocab_size > model_config->vocab_size) {
    return Invalid("model", absl::StrCat("vocabulary ", model_config->vocab_size,
                                         " is smaller than the dataset's ",
                                         manifest->vocab_size));
  }
  auto train_docs = data::OpenDatasetSplit(config.data, "train");
  if (!train_docs.ok()) return train_docs.status();
  auto val_docs = data::OpenDatasetSplit(config.data, "validation");
  if (!val_docs.ok()) return val_docs.status();

  data::BatchLoaderOptions loader_options;
  loader_options.seq_len = config.seq_len;
  loader_options.micro_batch_size = config.micro_batch;
  loader_options.seed = config.seed;
  loader_options.eos_id = manifest->eos_id;
  loader_options.pad_id = manifest->pad_id;
  auto train_loader = data::BatchLoader::Create(*train_docs, loader_options);
  if (!train_loader.ok()) return train_loader.status();
  auto val_loader = data::BatchLoader::CreateValidation(*val_docs, loader_options);
  if (!val_loader.ok()) return val_loader.status();

  const int threads = config.threads > 0 ? config.threads : DefaultThreadCount();
  openblas_set_num_threads(threads);
  ThreadPool pool(threads);
  model::LocalCoreAttention attention(&pool);

  auto created = model::Transformer::Create(*model_config);
  if (!created.ok()) return created.status();
  model::Transformer& model = *created;
  model.InitializeWeights(config.seed);

  std::vector<uint8_t> decay_mask(model.layout().total_size(), 0);
  for (const model::TensorSlot& slot : model.layout().tensors()) {
    if (slot.is_matrix) {
      std::fill(decay_mask.begin() + slot.offset, decay_mask.begin() + slot.offset + slot.size, 1);
    }
  }
  optim::AdamW optimizer({config.beta1, config.beta2, config.epsilon, config.weight_decay},
                         std::move(decay_mask));
  optim::LrSchedule schedule;
  schedule.kind = *optim::LrSchedule::ParseKind(config.schedule);
  schedule.peak_lr = config.lr;
  schedule.min_lr = config.min_lr;
  schedule.warmup_steps = config.warmup;
  schedule.total_steps = config.steps;

  std::unique_ptr<std::ofstream> csv;
  if (!config.metrics_out.empty()) {
    csv = std::make_unique<std::ofstream>(config.metrics_out);
    if (!*csv) return Invalid("metrics_out", absl::StrCat("cannot write ", config.metrics_out));
    *csv << "step,train_loss,val_loss,tokens_per_s,lr,grad_norm,elapsed_s\n";
  }

  LocalTrainSummary summary;
  summary.parameters = model.layout().total_size();
  summary.unigram_entropy = manifest->train_unigram_entropy_with_eos_nats;
  auto first_val = Evaluate(model, **val_loader, config.eval_batches, attention);
  if (!first_val.ok()) return first_val.status();
  summary.first_val_loss = *first_val;
  summary.final_val_loss = *first_val;

  model::Activations activations;
  const absl::Time start = absl::Now();
  int64_t total_tokens = 0;
  for (int64_t step = 0; step < config.steps; ++step) {
    const absl::Time step_start = absl::Now();
    // Scale by the tokens of the whole (accumulated) batch, so the gradient
    // is that of the mean loss however the batch is split.
    std::vector<model::ModelBatch> micro_batches;
    int64_t step_tokens = 0;
    for (int32_t a = 0; a < config.grad_accum; ++a) {
      std::optional<data::PackedBatch> packed = (*train_loader)->Next();
      if (!packed) return absl::InternalError("training loader ran dry");
      micro_batches.push_back(ToModelBatch(*packed));
      for (int32_t t : micro_batches.back().targets) step_tokens += t >= 0;
    }
    model.ZeroGradients();
    double loss_sum = 0.0;
    for (const model::ModelBatch& batch : micro_batches) {
      auto loss = model.Forward(batch, attention, activations);
      if (!loss.ok()) return loss.status();
      loss_sum += loss->loss_sum;
      if (absl::Status s = model.Backward(attention, activations,
                                          1.0f / std::max<int64_t>(1, step_tokens));
          !s.ok()) {
        return s;
      }
    }
    StepMetrics metrics;
    metrics.step = step + 1;
    metrics.grad_norm = optim::ClipGradientNorm(model.gradients().data(),
                                                model.gradients().size(), config.grad_clip);
    metrics.learning_rate = schedule.At(step);
    if (absl::Status s = optimizer.Step(model.parameters().data(), model.gradients().data(),
                                        model.parameters().size(), metrics.learning_rate);
        !s.ok()) {
      return s;
    }
    const int64_t rows_tokens = int64_t{config.grad_accum} * config.micro_batch * config.seq_len;
    total_tokens += rows_tokens;
    metrics.train_loss = loss_sum / std::max<int64_t>(1, step_tokens);
    metrics.tokens_per_second = rows_tokens / absl::ToDoubleSeconds(absl::Now() - step_start);
    if (!std::isfinite(metrics.train_loss)) {
      return absl::InternalError(absl::StrCat("training diverged at step ", step + 1,
                                              " (loss ", metrics.train_loss, ")"));
    }
    const bool last = step + 1 == config.steps;
    if (last || (config.eval_interval > 0 && (step + 1) % config.eval_interval == 0)) {
      auto val = Evaluate(model, **val_loader, config.eval_batches, attention);
      if (!val.ok()) return val.status();
      metrics.val_loss = *val;
      summary.final_val_loss = *val;
    }
    metrics.elapsed_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    summary.final_train_loss = metrics.train_loss;
    if (csv) {
      *csv << metrics.step << "," << absl::StrFormat("%.6f", metrics.train_loss) << ","
           << (metrics.val_loss >= 0 ? absl::StrFormat("%.6f", metrics.val_loss) : "") << ","
           << absl::StrFormat("%.1f", metrics.tokens_per_second) << ","
           << absl::StrFormat("%.6g", metrics.learning_rate) << ","
           << absl::StrFormat("%.4f", metrics.grad_norm) << ","
           << absl::StrFormat("%.3f", metrics.elapsed_seconds) << "\n";
      csv->flush();
    }
    if (on_step) on_step(metrics);
  }
  summary.steps = config.steps;
  summary.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  summary.tokens_per_second = total_tokens / std::max(1e-9, summary.seconds);
  return summary;
}

}  // namespace corescape::train
