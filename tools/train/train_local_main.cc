// corescape-train-local: single-process training for debugging and
// benchmarks (`corescape train-local` runs this). Distributed training is
// the scheduler's job.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/base/atomic_file.h"
#include "runtime/model/model_config.h"
#include "runtime/local/local_trainer.h"

namespace {
const corescape::local::LocalTrainConfig kDefaults;
}  // namespace

ABSL_FLAG(std::string, config, "", "JSON file of settings (keys = flag names); flags given too override it");
ABSL_FLAG(std::string, model, kDefaults.model,
          absl::StrCat("model preset: ", absl::StrJoin(corescape::model::PresetNames(), ", ")));
ABSL_FLAG(std::string, data, kDefaults.data, "dataset directory from `corescape data prepare`");
ABSL_FLAG(int32_t, seq_len, kDefaults.seq_len, "tokens per row");
ABSL_FLAG(int32_t, micro_batch, kDefaults.micro_batch, "rows per micro-batch");
ABSL_FLAG(int32_t, grad_accum, kDefaults.grad_accum, "micro-batches per step");
ABSL_FLAG(int64_t, steps, kDefaults.steps, "optimizer steps");
ABSL_FLAG(double, lr, kDefaults.lr, "peak learning rate");
ABSL_FLAG(double, min_lr, kDefaults.min_lr, "final learning rate of the decay");
ABSL_FLAG(int64_t, warmup, kDefaults.warmup, "linear warm-up steps");
ABSL_FLAG(std::string, schedule, kDefaults.schedule, "constant, linear or cosine");
ABSL_FLAG(double, weight_decay, kDefaults.weight_decay, "AdamW decoupled weight decay (matrices only)");
ABSL_FLAG(double, beta1, kDefaults.beta1, "AdamW beta1");
ABSL_FLAG(double, beta2, kDefaults.beta2, "AdamW beta2");
ABSL_FLAG(double, epsilon, kDefaults.epsilon, "AdamW epsilon");
ABSL_FLAG(double, grad_clip, kDefaults.grad_clip, "global gradient-norm clip of adamw (0: off)");
ABSL_FLAG(std::string, optimizer, kDefaults.optimizer, "as a job spec's optimizer.name (docs/jobs.md)");
ABSL_FLAG(double, density, kDefaults.density, "sparse optimizers: fraction of entries sent per step");
ABSL_FLAG(std::string, scape_rule, kDefaults.scape_rule,
          "scape: the update rule, as a job spec's optimizer.scape.rule (empty: its default)");
ABSL_FLAG(bool, offload_residuals, kDefaults.offload_residuals,
          "scape (the default catch-up rule or --scape_rule=reference) on a GPU: keep the "
          "residuals in pinned host memory");
ABSL_FLAG(int64_t, eval_interval, kDefaults.eval_interval, "validate every N steps (and at the end)");
ABSL_FLAG(int64_t, eval_batches, kDefaults.eval_batches, "validation micro-batches (0: all)");
ABSL_FLAG(uint64_t, seed, kDefaults.seed, "weights and data order");
ABSL_FLAG(int32_t, threads, kDefaults.threads, "compute threads (0: all cores)");
ABSL_FLAG(std::string, device, kDefaults.device, "cpu, or cuda:N (a --config=cuda build on a GPU machine)");
ABSL_FLAG(std::string, precision, kDefaults.precision,
          "fp32 or bf16 (GPU only); empty: bf16 on a GPU, fp32 on the CPU");
ABSL_FLAG(double, peak_tflops, kDefaults.peak_tflops,
          "the device's dense peak in TFLOP/s for the MFU shown; 0: NVIDIA's figure for a GPU "
          "it knows (H100, H200, GH200, A100), else no MFU");
ABSL_FLAG(std::string, metrics_out, kDefaults.metrics_out, "write the loss curve as CSV here");

namespace {

// Flags the user typed win over the config file; the rest keep its values.
template <typename T>
void Override(const absl::Flag<T>& flag, T& field) {
  const T value = absl::GetFlag(flag);
  if (absl::GetFlagReflectionHandle(flag).CurrentValue() !=
      absl::GetFlagReflectionHandle(flag).DefaultValue()) {
    field = value;
  }
}

// "12.3 TFLOP/s, MFU 41.7%"; the MFU only where the device's peak is known.
std::string ComputeRate(double tflops, double mfu) {
  std::string text = absl::StrFormat("%.3g TFLOP/s", tflops);
  if (mfu > 0) absl::StrAppend(&text, absl::StrFormat(", MFU %.1f%%", 100 * mfu));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "corescape train-local --data=DIR [--model=tiny] [--steps=N] [--config=FILE.json] "
      "[--metrics_out=FILE.csv]");
  absl::ParseCommandLine(argc, argv);
  corescape::local::LocalTrainConfig config;
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    auto text = corescape::ReadFileToString(path);
    if (!text.ok()) {
      std::fprintf(stderr, "corescape train-local: --config: %s\n",
                   std::string(text.status().message()).c_str());
      return 2;
    }
    auto parsed = corescape::local::ParseLocalTrainConfig(*text, config, path);
    if (!parsed.ok()) {
      std::fprintf(stderr, "corescape train-local: %s\n",
                   std::string(parsed.status().message()).c_str());
      return 2;
    }
    config = *parsed;
  }
  Override(FLAGS_model, config.model);
  Override(FLAGS_data, config.data);
  Override(FLAGS_seq_len, config.seq_len);
  Override(FLAGS_micro_batch, config.micro_batch);
  Override(FLAGS_grad_accum, config.grad_accum);
  Override(FLAGS_steps, config.steps);
  Override(FLAGS_lr, config.lr);
  Override(FLAGS_min_lr, config.min_lr);
  Override(FLAGS_warmup, config.warmup);
  Override(FLAGS_schedule, config.schedule);
  Override(FLAGS_weight_decay, config.weight_decay);
  Override(FLAGS_beta1, config.beta1);
  Override(FLAGS_beta2, config.beta2);
  Override(FLAGS_epsilon, config.epsilon);
  Override(FLAGS_grad_clip, config.grad_clip);
  Override(FLAGS_optimizer, config.optimizer);
  Override(FLAGS_density, config.density);
  Override(FLAGS_scape_rule, config.scape_rule);
  Override(FLAGS_offload_residuals, config.offload_residuals);
  Override(FLAGS_eval_interval, config.eval_interval);
  Override(FLAGS_eval_batches, config.eval_batches);
  Override(FLAGS_seed, config.seed);
  Override(FLAGS_threads, config.threads);
  Override(FLAGS_device, config.device);
  Override(FLAGS_precision, config.precision);
  Override(FLAGS_peak_tflops, config.peak_tflops);
  Override(FLAGS_metrics_out, config.metrics_out);
  if (absl::Status s = config.Validate(); !s.ok()) {
    std::fprintf(stderr, "corescape train-local: %s\n", std::string(s.message()).c_str());
    return 2;
  }

  std::printf("train-local: model %s, data %s, %lld steps of %d x %d x %d tokens on %s (%s)\n",
              config.model.c_str(), config.data.c_str(), static_cast<long long>(config.steps),
              config.grad_accum, config.micro_batch, config.seq_len,
              config.TrainingDevice().ToString().c_str(),
              std::string(corescape::model::PrecisionName(config.TrainingPrecision())).c_str());
  std::fflush(stdout);
  auto summary = corescape::local::RunLocalTraining(
      config, [&](const corescape::local::StepMetrics& m) {
        const double eta = m.elapsed_seconds / m.step * (config.steps - m.step);
        if (m.val_loss < 0 && m.step % 10 != 0 && m.step != 1) return;
        const std::string val = m.val_loss >= 0 ? absl::StrFormat("  val %.4f", m.val_loss)
                                                : std::string(12, ' ');
        std::printf("step %5lld/%lld  loss %.4f%s  lr %.2e  %8.0f tok/s  %s  eta %.0fs\n",
                    static_cast<long long>(m.step), static_cast<long long>(config.steps),
                    m.train_loss, val.c_str(), m.learning_rate, m.tokens_per_second,
                    ComputeRate(m.model_tflops_per_second, m.mfu).c_str(), eta);
        std::fflush(stdout);
      });
  if (!summary.ok()) {
    std::fprintf(stderr, "corescape train-local: %s\n", std::string(summary.status().message()).c_str());
    return 1;
  }
  std::printf(
      "done: %lld steps in %.1fs (%.0f tokens/s, %s), %lld parameters\n"
      "validation loss %.4f -> %.4f nats/token (unigram entropy of the data %.4f)\n",
      static_cast<long long>(summary->steps), summary->seconds, summary->tokens_per_second,
      ComputeRate(summary->model_tflops_per_second, summary->mfu).c_str(),
      static_cast<long long>(summary->parameters), summary->first_val_loss,
      summary->final_val_loss, summary->unigram_entropy);
  return 0;
}
