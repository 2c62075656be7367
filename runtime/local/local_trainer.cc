#include "runtime/local/local_trainer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "runtime/device/device_runtime.h"
#include "runtime/job/job_device.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/trainer_config.h"
#include "runtime/model/peak_flops.h"
#include "runtime/train/data_parallel_trainer.h"

namespace corescape::local {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// The job spec's fields ToJobSpec fills from a setting of another name: a
// refusal of the job names the setting the user wrote.
constexpr std::pair<absl::string_view, absl::string_view> kSettingOfSpecField[] = {
    {"model.preset", "model"},
    {"data.train_shards[0]", "data"},
    {"data.sequence_length", "seq_len"},
    {"data.micro_batch_size", "micro_batch"},
    {"data.gradient_accumulation", "grad_accum"},
    {"optimizer.name", "optimizer"},
    {"optimizer.learning_rate", "lr"},
    {"optimizer.min_learning_rate", "min_lr"},
    {"optimizer.warmup_steps", "warmup"},
    {"optimizer.schedule", "schedule"},
    {"optimizer.weight_decay", "weight_decay"},
    {"optimizer.beta1", "beta1"},
    {"optimizer.beta2", "beta2"},
    {"optimizer.epsilon", "epsilon"},
    {"optimizer.grad_clip", "grad_clip"},
    {"optimizer.scape.density", "density"},
    {"optimizer.scape.rule", "scape_rule"},
    {"optimizer.scape.offload_residuals", "offload_residuals"},
    {"eval_interval_steps", "eval_interval"},
};

// ValidateJobSpec's "spec.<field>: why" as "<setting>: why".
absl::Status NamedBySetting(const absl::Status& status) {
  absl::string_view message = status.message();
  if (!absl::ConsumePrefix(&message, "spec.")) return status;
  for (const auto& [field, setting] : kSettingOfSpecField) {
    absl::string_view why = message;
    if (absl::ConsumePrefix(&why, field) && absl::ConsumePrefix(&why, ": ")) {
      return absl::Status(status.code(), absl::StrCat(setting, ": ", why));
    }
  }
  return status;
}

}  // namespace

absl::StatusOr<job::ResolvedJobSpec> LocalTrainConfig::Resolve() const {
  // What a job spec has no field for: train-local's own settings.
  if (data.empty()) return Invalid("data", "required: a directory from `corescape data prepare`");
  // A job spec reads 0 as "the default": these settings always have a value,
  // so 0 is refused rather than replaced.
  for (const auto& [setting, value] :
       {std::pair<const char*, double>{"seq_len", seq_len}, {"micro_batch", micro_batch},
        {"grad_accum", grad_accum}, {"lr", lr}, {"epsilon", epsilon}}) {
    if (value == 0) return Invalid(setting, "must be positive");
  }
  if (offload_residuals && !job::UsesMaskEpochs(optimizer)) {
    // ToJobSpec gives a dense optimizer no sparse settings: refused, not dropped.
    return Invalid("offload_residuals",
                   absl::StrCat("'", optimizer, "' keeps all its state in host memory"));
  }
  if (!std::isfinite(peak_tflops) || peak_tflops < 0) {
    return Invalid("peak_tflops", "must be a number >= 0 (0: the GPU's known peak)");
  }
  if (eval_batches < 0) return Invalid("eval_batches", "must not be negative");
  if (threads < 0 || threads > 1024) return Invalid("threads", "must be in [0, 1024]");
  auto parsed_device = device::ParseDevice(device);
  if (!parsed_device.ok()) return Invalid("device", parsed_device.status().message());
  if (!precision.empty()) {
    auto parsed_precision = model::ParsePrecision(precision);
    if (!parsed_precision.ok()) return Invalid("precision", parsed_precision.status().message());
    if (*parsed_precision == model::Precision::kBf16 && !parsed_device->is_cuda()) {
      return Invalid("precision", "bf16 needs a GPU (device cuda:N); the CPU computes in fp32");
    }
  }
  // The rest is a job's: resolved and checked as a submitted one is.
  auto resolved = job::ResolveJobSpec(ToJobSpec());
  if (!resolved.ok()) return NamedBySetting(resolved.status());
  // This machine opens the data: any dataset on it ("/" is the root).
  if (absl::Status s = job::CheckDatasetsUnder(resolved->spec().data(), "/"); !s.ok()) {
    return NamedBySetting(s);
  }
  return resolved;
}

absl::Status LocalTrainConfig::Validate() const { return Resolve().status(); }

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
    auto read_bool = [&](bool& out) -> absl::Status {
      if (!value.is_boolean()) return wrong_type("true or false");
      out = value.get<bool>();
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
    else if (key == "optimizer") status = read_string(config.optimizer);
    else if (key == "density") status = read_double(config.density);
    else if (key == "scape_rule") status = read_string(config.scape_rule);
    else if (key == "offload_residuals") status = read_bool(config.offload_residuals);
    else if (key == "eval_interval") status = read_int(config.eval_interval);
    else if (key == "eval_batches") status = read_int(config.eval_batches);
    else if (key == "seed") status = read_int(config.seed);
    else if (key == "threads") status = read_int(config.threads);
    else if (key == "device") status = read_string(config.device);
    else if (key == "precision") status = read_string(config.precision);
    else if (key == "peak_tflops") status = read_double(config.peak_tflops);
    else if (key == "metrics_out") status = read_string(config.metrics_out);
    else return absl::InvalidArgumentError(absl::StrCat(source, ": unknown key '", key, "'"));
    if (!status.ok()) return status;
  }
  return config;
}

v1::JobSpec LocalTrainConfig::ToJobSpec() const {
  v1::JobSpec spec;
  spec.set_name("train-local");
  spec.mutable_model()->set_preset(model);
  v1::DataSpec& d = *spec.mutable_data();
  // A job names its data by absolute path.
  std::error_code error;
  d.add_train_shards(data.empty() ? data
                                  : std::filesystem::absolute(data, error).lexically_normal().string());
  d.set_sequence_length(seq_len);
  d.set_micro_batch_size(micro_batch);
  d.set_gradient_accumulation(grad_accum);
  v1::OptimizerSpec& o = *spec.mutable_optimizer();
  o.set_name(optimizer);
  o.set_learning_rate(lr);
  o.set_min_learning_rate(min_lr);
  o.set_warmup_steps(warmup);
  o.set_schedule(schedule);
  o.set_weight_decay(weight_decay);
  o.set_beta1(beta1);
  o.set_beta2(beta2);
  o.set_epsilon(epsilon);
  o.set_grad_clip(grad_clip);
  if (auto traits = optim::FindOptimizer(optimizer); traits.ok() && (*traits)->sparse) {
    o.mutable_scape()->set_density(density);
    if (!scape_rule.empty()) o.mutable_scape()->set_rule(scape_rule);
    o.mutable_scape()->set_offload_residuals(offload_residuals);
  }
  spec.set_steps(steps);
  spec.set_eval_interval_steps(eval_interval);
  spec.set_seed(seed);
  spec.set_device(TrainingDevice().is_cuda() ? v1::CUDA : v1::CPU);
  return spec;
}

device::Device LocalTrainConfig::TrainingDevice() const {
  return device::ParseDevice(device).value_or(device::Device::Cpu());
}

model::Precision LocalTrainConfig::TrainingPrecision() const {
  if (precision.empty()) return model::DefaultPrecision(TrainingDevice());
  return model::ParsePrecision(precision).value_or(model::Precision::kFp32);
}

absl::StatusOr<LocalTrainSummary> RunLocalTraining(
    const LocalTrainConfig& config, const std::function<void(const StepMetrics&)>& on_step) {
  auto spec = config.Resolve();
  if (!spec.ok()) return spec.status();
  auto trainer_config = job::TrainerConfigFromSpec(*spec);
  if (!trainer_config.ok()) return trainer_config.status();
  trainer_config->threads = config.threads;
  trainer_config->device = config.TrainingDevice();
  trainer_config->precision = config.TrainingPrecision();
  train::SingleProcessGroup group;
  auto trainer = train::DataParallelTrainer::Create(*trainer_config, &group);
  if (!trainer.ok()) return trainer.status();

  std::unique_ptr<std::ofstream> csv;
  if (!config.metrics_out.empty()) {
    csv = std::make_unique<std::ofstream>(config.metrics_out);
    if (!*csv) return Invalid("metrics_out", absl::StrCat("cannot write ", config.metrics_out));
    *csv << "step,train_loss,val_loss,tokens_per_s,lr,grad_norm,elapsed_s\n";
  }

  // This process serves its device as a worker would, for the MFU's peak.
  v1::ServedDevice served;
  if (trainer_config->device.is_cuda()) {
    auto runtime = device::OpenDevice(trainer_config->device);
    if (!runtime.ok()) return runtime.status();
    auto info = (*runtime)->Info();
    if (!info.ok()) return info.status();
    served.set_kind(v1::CUDA);
    served.set_gpu_model(info->name);
  }
  const double peak_tflops = job::MfuPeakTflops(
      served, {trainer_config->device, trainer_config->precision}, config.peak_tflops);

  LocalTrainSummary summary;
  summary.parameters = (*trainer)->model().layout().total_size();
  summary.unigram_entropy = (*trainer)->unigram_entropy();
  auto first_val = (*trainer)->Validate(config.eval_batches);
  if (!first_val.ok()) return first_val.status();
  summary.first_val_loss = *first_val;
  summary.final_val_loss = *first_val;

  const absl::Time start = absl::Now();
  int64_t total_tokens = 0;
  double total_flops = 0, step_seconds = 0;
  for (int64_t step = 0; step < config.steps; ++step) {
    auto result = (*trainer)->Step();
    if (!result.ok()) return result.status();
    if (!std::isfinite(result->loss)) {
      return absl::InternalError(absl::StrCat("training diverged at step ", result->step,
                                              " (loss ", result->loss, ")"));
    }
    total_tokens += int64_t{config.grad_accum} * config.micro_batch * config.seq_len;
    StepMetrics metrics;
    metrics.step = result->step;
    metrics.train_loss = result->loss;
    metrics.learning_rate = result->learning_rate;
    metrics.grad_norm = result->grad_norm;
    metrics.tokens_per_second = result->tokens_per_second;
    const double seconds = result->compute_seconds + result->communication_seconds;
    total_flops += result->model_flops;
    step_seconds += seconds;
    metrics.model_tflops_per_second = model::ModelTflopsPerSecond(result->model_flops, seconds);
    metrics.mfu = model::Mfu(metrics.model_tflops_per_second, peak_tflops);
    const bool last = step + 1 == config.steps;
    if (last || (config.eval_interval > 0 && (step + 1) % config.eval_interval == 0)) {
      auto val = (*trainer)->Validate(config.eval_batches);
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
  summary.model_tflops_per_second = model::ModelTflopsPerSecond(total_flops, step_seconds);
  summary.mfu = model::Mfu(summary.model_tflops_per_second, peak_tflops);
  return summary;
}

}  // namespace corescape::local
