#include "tools/scape/driver_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "runtime/optim/optimizer_registry.h"
#include "tools/scape/run_shape_flags.h"

ABSL_FLAG(int64_t, steps, 400, "optimizer steps");
ABSL_FLAG(std::string, method,
          corescape::optim::OptimizerName(corescape::optim::OptimizerKind::kScape),
          absl::StrCat("optimizer: ", corescape::optim::OptimizerNameList()));
ABSL_FLAG(double, lr, 1e-3, "peak learning rate");
ABSL_FLAG(double, min_lr, 0.0, "final learning rate");
ABSL_FLAG(int64_t, lr_warmup, 40, "linear learning-rate warm-up steps");
ABSL_FLAG(std::string, schedule, "cosine", "constant | linear | cosine");
ABSL_FLAG(double, grad_clip, corescape::optim::kDefaultGradClip,
          "global-norm clip where the optimizer clips (adamw, SCAPE's reference rule); 0: off");
ABSL_FLAG(double, beta1, 0.9, "β1");
ABSL_FLAG(double, beta2, 0.95, "β2");
ABSL_FLAG(double, weight_decay, 0.1, "decoupled weight decay (matrices)");
ABSL_FLAG(double, density, corescape::optim::kDefaultDensity,
          "SCAPE / top-k density d = 1 − sparsity");
ABSL_FLAG(int64_t, dense_warmup, 0, "SCAPE: dense steps before the first mask");
ABSL_FLAG(int64_t, dense_refresh, 0, "SCAPE: a dense step every N steps after the warm-up (0: never)");
ABSL_FLAG(double, density_start, 1.0, "density schedule: density before and at --density_start_step");
ABSL_FLAG(int64_t, density_warmup, 0, "density schedule: steps from --density_start to --density (0: no schedule)");
ABSL_FLAG(int64_t, density_start_step, 0, "density schedule: the step the density starts to fall");
ABSL_FLAG(std::string, density_shape, "linear", "density schedule: linear | geometric");
ABSL_FLAG(bool, per_tensor_masks, false, "SCAPE: masks per parameter tensor, whole tensors per rank");
ABSL_FLAG(bool, dense_small_tensors, false, "SCAPE per-tensor masks: norm gains sent whole");
ABSL_FLAG(std::string, statistic, "momentum-plus-scaled-residual",
          "SCAPE mask statistic: momentum-plus-scaled-residual | momentum-plus-residual | residual | "
          "momentum | normalized-residual");
ABSL_FLAG(double, normalizer_beta, 0.95, "SCAPE catch-up: ρ of the smoothed normalizer");
ABSL_FLAG(double, catch_up_exponent, 0.65, "SCAPE catch-up: a K-step value moves K^this steps");
ABSL_FLAG(bool, validate, true, "validation loss before training, every --eval_interval and at the end");
ABSL_FLAG(int64_t, eval_interval, 100, "validate every N steps (and at the end; <= 0: only at the end)");
ABSL_FLAG(uint64_t, seed, 1, "weights and data order");
ABSL_FLAG(std::string, csv, "", "write the per-step curve here");

namespace corescape::scape_tool {
namespace {

absl::Status Unknown(absl::string_view flag, absl::string_view value) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": unknown value '", value, "'"));
}

absl::Status ParseEnums(optim::ScapeConfig& c) {
  const std::string stat = absl::GetFlag(FLAGS_statistic);
  auto statistic = optim::ParseMaskStatistic(stat);
  if (!statistic.ok()) return Unknown("statistic", stat);
  c.statistic = *statistic;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DriverConfig> DriverConfigFromFlags() {
  DriverConfig config;
  if (absl::Status status = SetRunShapeFromFlags(config); !status.ok()) return status;
  config.steps = absl::GetFlag(FLAGS_steps);
  config.method = absl::GetFlag(FLAGS_method);
  config.lr = absl::GetFlag(FLAGS_lr);
  config.min_lr = absl::GetFlag(FLAGS_min_lr);
  config.lr_warmup = absl::GetFlag(FLAGS_lr_warmup);
  config.schedule = absl::GetFlag(FLAGS_schedule);
  config.validate = absl::GetFlag(FLAGS_validate);
  config.eval_interval = absl::GetFlag(FLAGS_eval_interval);
  config.seed = absl::GetFlag(FLAGS_seed);
  config.csv = absl::GetFlag(FLAGS_csv);
  config.grad_clip = absl::GetFlag(FLAGS_grad_clip);
  optim::ScapeConfig& s = config.scape;
  s.grad_clip = config.grad_clip;  // what the optimizer is built with (CreateOptimizer sets it too)
  s.adams.beta1 = absl::GetFlag(FLAGS_beta1);
  s.adams.beta2 = absl::GetFlag(FLAGS_beta2);
  s.adams.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  s.density = absl::GetFlag(FLAGS_density);
  s.dense_warmup_steps = absl::GetFlag(FLAGS_dense_warmup);
  s.dense_refresh_interval = absl::GetFlag(FLAGS_dense_refresh);
  auto shape = optim::ParseDensityShape(absl::GetFlag(FLAGS_density_shape));
  if (!shape.ok()) return Unknown("density_shape", absl::GetFlag(FLAGS_density_shape));
  s.density_schedule = {absl::GetFlag(FLAGS_density_start), absl::GetFlag(FLAGS_density_warmup),
                        absl::GetFlag(FLAGS_density_start_step), *shape};
  s.per_tensor_masks = absl::GetFlag(FLAGS_per_tensor_masks);
  s.dense_small_tensors = absl::GetFlag(FLAGS_dense_small_tensors);
  s.normalizer_beta = absl::GetFlag(FLAGS_normalizer_beta);
  s.catch_up_exponent = absl::GetFlag(FLAGS_catch_up_exponent);
  if (absl::Status status = ParseEnums(s); !status.ok()) return status;
  return config;
}

}  // namespace corescape::scape_tool
