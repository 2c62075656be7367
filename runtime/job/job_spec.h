#ifndef CORESCAPE_RUNTIME_JOB_JOB_SPEC_H_
#define CORESCAPE_RUNTIME_JOB_JOB_SPEC_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "corescape/v1/job.pb.h"
#include "runtime/model/model_config.h"
#include "runtime/optim/optimizer_registry.h"

// A JobSpec as everyone reads it: the defaults of its unset fields, its
// validation and the model it describes. Where a spec is accepted (the
// scheduler at submit, train-local) ResolveJobSpec applies and checks them,
// once; the worker checks what it is sent and translates it
// (trainer_config.h). No default or optimizer name is spelled out twice.
namespace corescape::job {

// The defaults ApplyJobDefaults fills (docs/jobs.md lists them). Optimizer
// hyper-parameters not listed here come from optim::AdamConfig, gradient
// clipping from optim::kDefaultGradClip, the sparse density from
// optim::kDefaultDensity.
struct JobDefaults {
  const char* preset = "tiny";
  int32_t sequence_length = 128;
  int32_t micro_batch_size = 8;
  int32_t gradient_accumulation = 1;
  const char* optimizer = optim::kDefaultOptimizer;
  double learning_rate = 3e-3;
  const char* schedule = "cosine";
  int32_t workers = 1;
  double attention_tolerance = 0.05;
  uint64_t seed = 1;
  const char* name = "job";
};
inline constexpr JobDefaults kJobDefaults;

// The most workers one job may ask for: a typo guard ("more workers than can
// ever exist"), far above anything this scheduler has been run with.
inline constexpr int kMaxJobWorkers = 1024;

// The most parameters a job's model may have (400 GB of fp32 weights): a
// guard against a spec whose model no worker could ever allocate, far above
// the paper-scale presets (llama-1.8b).
inline constexpr int64_t kMaxModelParameters = 100'000'000'000;

// The most datasets one of a job's data lists may name: a typo guard far
// above any real job (a dataset is a directory of shards).
inline constexpr int kMaxDatasets = 256;

// Whether the optimizer named so follows the scheduler's mask epochs (SCAPE
// and its per-rank global top-k baseline); false for unknown names.
bool UsesMaskEpochs(const std::string& optimizer);

// Fills every default the user may leave out. Idempotent.
void ApplyJobDefaults(v1::JobSpec& spec);

// INVALID_ARGUMENT naming the field ("spec.data.micro_batch_size: must be
// positive"). Reads no filesystem: data and checkpoint paths are checked
// for form only (absolute, printable, no `..`); the machines that open them
// check them against their roots (CheckDatasetsUnder,
// CheckCheckpointDirectoryUnder).
absl::Status ValidateJobSpec(const v1::JobSpec& spec);

// A JobSpec with its defaults applied and its fields checked: what a
// trainer is built from (TrainerConfigFromSpec). Only ResolveJobSpec and
// CheckResolvedJobSpec make one, so the defaults are applied once, where a
// spec is accepted, and never again on the way to a trainer.
class ResolvedJobSpec {
 public:
  const v1::JobSpec& spec() const { return spec_; }

 private:
  explicit ResolvedJobSpec(v1::JobSpec spec) : spec_(std::move(spec)) {}
  friend absl::StatusOr<ResolvedJobSpec> ResolveJobSpec(v1::JobSpec spec);
  friend absl::StatusOr<ResolvedJobSpec> CheckResolvedJobSpec(v1::JobSpec spec);

  v1::JobSpec spec_;
};

// Where a spec is accepted (the scheduler at submit, `corescape
// train-local`): ApplyJobDefaults, then ValidateJobSpec.
absl::StatusOr<ResolvedJobSpec> ResolveJobSpec(v1::JobSpec spec);

// A spec resolved where it was accepted and sent on (a worker's
// assignment): validated again, so a malformed one is refused naming the
// field, but not defaulted again.
absl::StatusOr<ResolvedJobSpec> CheckResolvedJobSpec(v1::JobSpec spec);

// `path` as this machine resolves it: symbolic links followed as far as it
// exists, `.` and `..` applied, no trailing separator.
std::string ResolvedPath(const std::string& path);

// Whether resolved `directory` is resolved `root` or lies inside it (false
// unless both are absolute), compared component by component after `.` and
// `..`, without touching the filesystem: the one containment rule for
// checkpoints and datasets. The worker applies it at assignment
// (CheckCheckpointDirectoryUnder, CheckDatasetsUnder); the scheduler at
// submit and placement, against the roots workers report when they register
// (Resources.checkpoint_root and data_root, resolved on their host).
bool ResolvedPathWithin(const std::string& directory, const std::string& root);

// Whether checkpoint directory `directory` (absolute, as ValidateJobSpec
// requires) lies inside `root` (absolute) once both are resolved
// (ResolvedPath, ResolvedPathWithin). A worker refuses an assignment whose
// checkpoints would land outside its --checkpoint_root; PERMISSION_DENIED
// naming both otherwise.
absl::Status CheckCheckpointDirectoryUnder(const std::string& directory, const std::string& root);

// Whether every dataset `data` names lies inside `root` (absolute) once both
// are resolved on this machine, and holds its manifest: where data is
// opened (a worker against its --data_root, train-local against "/").
// PERMISSION_DENIED naming the field and the root for a path outside it, in
// the same words whether that path exists or not; FAILED_PRECONDITION for a
// path inside it that is no dataset.
absl::Status CheckDatasetsUnder(const v1::DataSpec& data, const std::string& root);

// The sparse optimizers' settings an OptimizerSpec (defaults applied)
// describes: density, schedule, warm-up, rule, statistic, mask shape. The
// rest of the formulation (exponents) stays at ScapeConfig's defaults, the
// best measured (docs/scape.md); the mask epoch's fields come from the
// scheduler. The worker's trainer, the scheduler's mask epochs and
// ValidateJobSpec (which runs ScapeConfig::Validate on it) read it. A name
// it cannot parse is INVALID_ARGUMENT naming the field
// ("optimizer.scape.rule: ...").
absl::StatusOr<optim::ScapeConfig> ScapeConfigFromSpec(const v1::OptimizerSpec& spec);

// The model a JobSpec describes: its preset with the spec's non-zero fields
// overriding it. Not validated: ValidateJobSpec runs ModelConfig::Validate().
absl::StatusOr<model::ModelConfig> ModelConfigFromSpec(const v1::ModelSpec& spec);

}  // namespace corescape::job

#endif  // CORESCAPE_RUNTIME_JOB_JOB_SPEC_H_
