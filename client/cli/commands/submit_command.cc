// `corescape submit [FILE] [flags] [--wait]`: submit a training job
// (SubmitJob) from a job file and/or flags; with --wait, follow it to its
// end like `corescape watch`.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/cli/common.h"
#include "client/cli/rendering/job_output.h"
#include "client/cli/parsing/job_spec_file.h"
#include "runtime/job/attention_mode.h"
#include "runtime/job/job_device.h"
#include "client/cli/commands/watch.h"
#include "runtime/model/model_config.h"
#include "runtime/optim/optimizer_registry.h"

namespace corescape::cli {

namespace {

struct SubmitOptions {
  std::string file;
  JobSpecOverrides overrides;
  bool wait = false;
  std::string idempotency_key;
  WatchFlags watch;  // watch.json is --json
};

constexpr int kSubmitAttempts = 3;

// "adamw (dense AdamW ...), adams (...), ...": the registry's list.
std::string OptimizerHelp() {
  std::string help = "Optimizer: ";
  for (const optim::OptimizerTraits& traits : optim::Optimizers()) {
    if (&traits != &optim::Optimizers().front()) help += "; ";
    absl::StrAppend(&help, traits.name, " (", traits.description, ")");
  }
  return help;
}

// Lets a retried SubmitJob (after a lost answer) find the job the first
// attempt created instead of creating a second one.
std::string NewIdempotencyKey() {
  absl::BitGen random;
  return absl::StrFormat("cli-%016x%016x", absl::Uniform<uint64_t>(random),
                         absl::Uniform<uint64_t>(random));
}

absl::StatusOr<v1::JobSpec> BuildSpec(const SubmitOptions& options) {
  v1::JobSpec spec;
  if (!options.file.empty()) {
    absl::StatusOr<v1::JobSpec> from_file = ReadJobSpecFile(options.file);
    if (!from_file.ok()) return from_file.status();
    spec = *std::move(from_file);
  }
  if (absl::Status status = ApplyJobSpecOverrides(options.overrides, &spec);
      !status.ok()) {
    return status;
  }
  std::error_code error;
  const std::filesystem::path cwd = std::filesystem::current_path(error);
  if (!error) ResolveJobSpecPaths(cwd.string(), &spec);
  return spec;
}

int SubmitSpec(const SubmitOptions& options, const v1::JobSpec& spec,
               client::SchedulerClient& client, const SchedulerTarget& target) {
  v1::SubmitJobRequest request;
  *request.mutable_spec() = spec;
  request.set_idempotency_key(options.idempotency_key.empty()
                                  ? NewIdempotencyKey()
                                  : options.idempotency_key);
  absl::StatusOr<v1::SubmitJobResponse> response;
  for (int attempt = 1; attempt <= kSubmitAttempts; ++attempt) {
    response = client.SubmitJob(request);
    if (response.ok() || !client::IsUnreachable(response.status())) break;
    if (attempt < kSubmitAttempts) absl::SleepFor(absl::Milliseconds(300 * attempt));
  }
  if (!response.ok()) return FailRpc(response.status(), target, "SubmitJob");
  const v1::Job& job = response->job();
  if (job.job_id().empty()) {
    return Fail(kExitFailure,
                "the scheduler accepted the job but returned no job id");
  }

  if (options.watch.json) {
    if (!options.wait) {
      PrintJson(JobToJson(job));
      return kExitOk;
    }
    std::cout << nlohmann::json{{"type", "submitted"}, {"job", JobToJson(job)}}
                     .dump()
              << std::endl;
  } else {
    const std::string name =
        job.spec().name().empty() ? spec.name() : job.spec().name();
    std::cout << "submitted job" << (name.empty() ? "" : " " + name) << ": "
              << JobStateName(job.state())
              << (job.state_reason().empty() ? "" : " (" + job.state_reason() + ")")
              << "\n"
              << job.job_id() << std::endl;
  }
  if (!options.wait) return kExitOk;
  return WatchUntilEnd(client, target, job, /*after_sequence=*/0, options.watch);
}

// Usage errors (no spec, a bad file or flag) are reported before connecting.
int RunSubmit(const SubmitOptions& options, const GlobalOptions& globals) {
  if (options.file.empty() && options.overrides.empty()) {
    return Fail(kExitUsage,
                "give a job file (corescape submit FILE.json) or the job's "
                "flags (--name, --model, --train-data, --steps, ...); see "
                "corescape submit --help");
  }
  absl::StatusOr<v1::JobSpec> spec = BuildSpec(options);
  if (!spec.ok()) return Fail(kExitUsage, spec.status().message());
  return RunWithScheduler(
      globals, [&](client::SchedulerClient& client, const SchedulerTarget& target) {
        return SubmitSpec(options, *spec, client, target);
      });
}

constexpr char kSpecGroup[] = "Job spec (override the file)";

// A job-spec flag: sets `target` when given.
template <typename T>
CLI::Option* AddOverride(CLI::App& command, const std::string& name,
                         std::optional<T>& target, const std::string& help,
                         const std::string& type_name) {
  return command
      .add_option_function<T>(
          name, [&target](const T& value) { target = value; }, help)
      ->type_name(type_name)
      ->group(kSpecGroup);
}

}  // namespace

Subcommand AddSubmitCommand(CLI::App& parent, GlobalOptions& globals) {
  auto submit = AddSchedulerCommand<SubmitOptions>(
      parent, globals, "submit",
      "Submit a training job from a job file (JSON, or YAML) and/or flags; "
      "flags override the file. Prints the job id as the last line");
  const std::shared_ptr<SubmitOptions>& options = submit.options;
  CLI::App* command = submit.app;
  JobSpecOverrides& o = options->overrides;
  command->add_option("FILE", options->file,
                      "Job file: a corescape.v1.JobSpec as JSON (.json) or "
                      "YAML (.yaml, .yml); see examples/");
  command->add_flag("--wait", options->wait,
                    "Follow the job like `corescape watch` and exit 0 only "
                    "if it SUCCEEDED");
  command->add_flag("--json", options->watch.json,
                    "Print the submitted job as JSON (with --wait: JSON "
                    "lines, as `corescape watch --json`)");
  command
      ->add_option("--idempotency-key", options->idempotency_key,
                   "Resubmitting with the same key returns the job created "
                   "the first time (default: a random key per run)")
      ->type_name("KEY");
  AddWatchFlags(*command, options->watch);

  AddOverride(*command, "--name", o.name, "Job name", "NAME");
  AddOverride(*command, "--model", o.model,
              absl::StrCat("Model preset: ", absl::StrJoin(model::PresetNames(), ", ")),
              "PRESET");
  command
      ->add_option("--train-data", o.train_data,
                   "Training dataset directories, under the workers' --data_root "
                   "(repeatable, or a comma list)")
      ->type_name("PATH")
      ->allow_extra_args(false)
      ->group(kSpecGroup);
  command
      ->add_option("--validation-data", o.validation_data,
                   "Validation dataset directories, under the workers' --data_root "
                   "(repeatable, or a comma list)")
      ->type_name("PATH")
      ->allow_extra_args(false)
      ->group(kSpecGroup);
  AddOverride(*command, "--seq-len", o.seq_len, "Sequence length in tokens", "N");
  AddOverride(*command, "--micro-batch", o.micro_batch,
              "Sequences per micro-batch per worker", "N");
  AddOverride(*command, "--grad-accum", o.grad_accum,
              "Micro-batches accumulated per step", "N");
  AddOverride(*command, "--steps", o.steps, "Optimizer steps", "N");
  AddOverride(*command, "--optimizer", o.optimizer, OptimizerHelp(), "NAME")
      ->check(CLI::IsMember(optim::OptimizerNames()));
  AddOverride(*command, "--lr", o.lr, "Peak learning rate", "RATE");
  AddOverride(*command, "--density", o.density,
              "Sparse optimizers: fraction of entries communicated per step, (0, 1]",
              "FRACTION");
  AddOverride(*command, "--workers", o.workers, "Number of workers", "N");
  AddOverride(*command, "--min-workers", o.min_workers,
              "Elastic minimum of workers (0: not elastic)", "N");
  AddOverride(*command, "--eval-interval", o.eval_interval,
              "Validation every N steps", "N");
  AddOverride(*command, "--checkpoint-dir", o.checkpoint_dir,
              "Checkpoint directory", "DIR");
  AddOverride(*command, "--checkpoint-interval", o.checkpoint_interval,
              "Checkpoint every N steps", "N");
  AddOverride(*command, "--attention-mode", o.attention_mode, job::AttentionModeNameList(),
              "MODE")
      ->check(CLI::IsMember(job::AttentionModeNames()));
  AddOverride(*command, "--attention-servers", o.attention_servers,
              "Attention servers (disaggregated mode)", "N");
  AddOverride(*command, "--seed", o.seed, "Seed of weights and data order",
              "N");
  AddOverride(*command, "--device", o.device,
              absl::StrCat("What the job trains on: ", job::JobDeviceNames(),
                           " (a cuda job runs on workers serving a GPU)"),
              "DEVICE");
  return {command,
          [options, &globals]() { return RunSubmit(*options, globals); }};
}

}  // namespace corescape::cli
