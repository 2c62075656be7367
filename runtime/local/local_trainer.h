#ifndef CORESCAPE_RUNTIME_LOCAL_LOCAL_TRAINER_H_
#define CORESCAPE_RUNTIME_LOCAL_LOCAL_TRAINER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "corescape/v1/job.pb.h"
#include "runtime/device/device.h"
#include "runtime/job/job_spec.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/adam_config.h"
#include "runtime/optim/optimizer_registry.h"

namespace corescape::local {

// Everything a single-process training run needs. Field names double as the
// keys of the JSON config file and the flags of corescape-train-local. It
// trains the job ToJobSpec() describes, resolved like a submitted one
// (runtime/job), so the defaults are a job's except where a short local run
// wants others (steps, the schedule's warm-up and floor, weight decay).
struct LocalTrainConfig {
  std::string model = job::kJobDefaults.preset;
  std::string data;              // prepared dataset directory (corescape data prepare)
  int32_t seq_len = job::kJobDefaults.sequence_length;
  int32_t micro_batch = job::kJobDefaults.micro_batch_size;
  int32_t grad_accum = job::kJobDefaults.gradient_accumulation;
  int64_t steps = 200;
  std::string optimizer = job::kJobDefaults.optimizer;
  double lr = job::kJobDefaults.learning_rate;
  double min_lr = 3e-4;
  int64_t warmup = 20;
  std::string schedule = job::kJobDefaults.schedule;
  double weight_decay = optim::AdamConfig{}.weight_decay;
  double beta1 = optim::AdamConfig{}.beta1;
  double beta2 = optim::AdamConfig{}.beta2;
  double epsilon = optim::AdamConfig{}.epsilon;
  double grad_clip = optim::kDefaultGradClip;
  double density = optim::kDefaultDensity;  // sparse optimizers
  std::string scape_rule;        // scape: optimizer.scape.rule (empty: its default)
  bool offload_residuals = false;  // scape, rule reference on a GPU: residuals in pinned host memory
  int64_t eval_interval = 50;    // 0: only at the end
  int64_t eval_batches = 0;      // 0: the whole validation split
  uint64_t seed = 1;
  int32_t threads = 0;           // 0: CORESCAPE_NUM_THREADS or all cores
  std::string device = "cpu";    // cpu | cuda | cuda:N (device::ParseDevice)
  std::string precision;         // fp32 | bf16; empty: the device's default
  double peak_tflops = 0;        // the device's dense peak for MFU; 0: model::DensePeakTflops
  std::string metrics_out;       // CSV of the loss curve, if set

  // The one-worker job these settings describe (ToJobSpec), resolved as
  // a submitted job is (job::ResolveJobSpec), after the settings a job has
  // no field for (device, precision, peak_tflops, ...) are checked.
  // INVALID_ARGUMENT naming the setting.
  absl::StatusOr<job::ResolvedJobSpec> Resolve() const;
  absl::Status Validate() const;  // Resolve()'s status
  v1::JobSpec ToJobSpec() const;
  // The device and precision the step runs with (after Validate).
  device::Device TrainingDevice() const;
  model::Precision TrainingPrecision() const;
};

// Reads a JSON object whose keys are LocalTrainConfig fields over `base`.
absl::StatusOr<LocalTrainConfig> ParseLocalTrainConfig(absl::string_view json,
                                                       const LocalTrainConfig& base,
                                                       const std::string& source);

struct StepMetrics {
  int64_t step = 0;  // 1-based
  double train_loss = 0;
  double val_loss = -1;  // < 0: not evaluated this step
  double learning_rate = 0;
  double tokens_per_second = 0;
  double model_tflops_per_second = 0;  // the step's model FLOPs (model::TrainingFlops) per second
  double mfu = 0;                      // that over the device's peak; 0: the peak is unknown
  double grad_norm = 0;
  double elapsed_seconds = 0;
};

struct LocalTrainSummary {
  int64_t steps = 0;
  int64_t parameters = 0;
  double first_val_loss = 0;
  double final_val_loss = 0;
  double final_train_loss = 0;
  double unigram_entropy = 0;  // of the training data, nats/token
  double tokens_per_second = 0;
  double seconds = 0;
  // Over the training steps (validation excluded), as in StepMetrics.
  double model_tflops_per_second = 0;
  double mfu = 0;
};

// Trains `config.model` on `config.data`: the optimizer, warm-up +
// schedule, gradient clipping, periodic validation. Calls on_step after every step.
absl::StatusOr<LocalTrainSummary> RunLocalTraining(
    const LocalTrainConfig& config,
    const std::function<void(const StepMetrics&)>& on_step);

}  // namespace corescape::local

#endif  // CORESCAPE_RUNTIME_LOCAL_LOCAL_TRAINER_H_
