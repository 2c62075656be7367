#include "runtime/job/job_spec.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "runtime/base/printable_text.h"
#include "runtime/data/dataset_manifest.h"
#include "runtime/job/job_device.h"
#include "runtime/optim/adam_config.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::job {

bool UsesMaskEpochs(const std::string& optimizer) {
  auto traits = optim::FindOptimizer(optimizer);
  return traits.ok() && (*traits)->uses_mask_epochs;
}

namespace {

// Sparse methods: optimizer.scape.density is how much of the buffer they send.
bool IsSparse(const std::string& optimizer) {
  auto traits = optim::FindOptimizer(optimizer);
  return traits.ok() && (*traits)->sparse;
}

}  // namespace

absl::StatusOr<optim::ScapeConfig> ScapeConfigFromSpec(const v1::OptimizerSpec& opt) {
  const v1::ScapeSpec& scape = opt.scape();
  const auto unparsed = [](absl::string_view field, const absl::Status& status) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer.scape.", field, ": ", status.message()));
  };
  optim::ScapeConfig config;
  config.density = scape.density();
  if (!scape.rule().empty()) {
    auto rule = optim::ParseScapeRule(scape.rule());
    if (!rule.ok()) return unparsed("rule", rule.status());
    config.rule = *rule;
  }
  config.dense_warmup_steps = scape.dense_warmup_steps();  // as the rule takes it: WarmupSteps()
  if (!scape.mask_statistic().empty()) {
    auto statistic = optim::ParseMaskStatistic(scape.mask_statistic());
    if (!statistic.ok()) return unparsed("mask_statistic", statistic.status());
    config.statistic = *statistic;
  }
  config.per_tensor_masks = scape.per_tensor_masks();
  config.offload_residuals = scape.offload_residuals();
  config.dense_small_tensors = scape.dense_small_tensors();
  const v1::DensitySchedule& schedule = scape.density_schedule();
  if (schedule.warmup_steps() > 0) {
    auto shape = optim::ParseDensityShape(schedule.shape());
    if (!shape.ok()) return unparsed("density_schedule.shape", shape.status());
    config.density_schedule = {schedule.start(), schedule.warmup_steps(), schedule.start_step(),
                                *shape};
  }
  return config;
}

absl::StatusOr<model::ModelConfig> ModelConfigFromSpec(const v1::ModelSpec& m) {
  auto preset = model::PresetConfig(m.preset());
  if (!preset.ok()) return preset.status();
  model::ModelConfig config = *preset;
  if (m.n_layers()) config.n_layers = m.n_layers();
  if (m.d_model()) config.d_model = m.d_model();
  if (m.n_heads()) config.n_heads = m.n_heads();
  if (m.n_kv_heads()) config.n_kv_heads = m.n_kv_heads();
  if (m.d_ff()) config.d_ff = m.d_ff();
  if (m.vocab_size()) config.vocab_size = m.vocab_size();
  if (m.max_seq_len()) config.max_seq_len = m.max_seq_len();
  // Any value but 0 applies (NaN and negatives too), for Validate to judge:
  // an override is never dropped silently.
  if (m.rope_theta() != 0) config.rope_theta = m.rope_theta();
  if (m.norm_eps() != 0) config.norm_eps = m.norm_eps();
  if (m.tie_embeddings()) config.tie_embeddings = true;
  return config;
}

namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("spec.", field, ": ", why));
}

// A path a job names on the workers' filesystems: absolute, printable,
// without `..` components, so what the scheduler accepted is what every
// worker checks against its root.
absl::Status ValidateNodePath(absl::string_view field, const std::string& path) {
  if (path.empty() || path.size() > 4096) return Invalid(field, "empty or longer than 4096 bytes");
  if (std::optional<std::string> unsafe = FirstUnsafeCharacter(path)) {
    return Invalid(field, absl::StrCat("holds a ", *unsafe));
  }
  const std::filesystem::path parsed(path);
  if (!parsed.is_absolute()) {
    return Invalid(field, absl::StrCat("'", path, "' is not an absolute path"));
  }
  for (const std::filesystem::path& part : parsed) {
    if (part == "..") return Invalid(field, absl::StrCat("'", path, "' climbs out with '..'"));
  }
  return absl::OkStatus();
}

absl::Status ValidateDataPaths(absl::string_view field,
                               const google::protobuf::RepeatedPtrField<std::string>& paths,
                               bool required) {
  if (paths.empty()) {
    return required ? Invalid(field, "at least one dataset directory is required")
                    : absl::OkStatus();
  }
  if (paths.size() > kMaxDatasets) {
    return Invalid(field, absl::StrCat(paths.size(), " datasets, more than a job may name (",
                                       kMaxDatasets, ")"));
  }
  for (int i = 0; i < paths.size(); ++i) {
    if (absl::Status s = ValidateNodePath(absl::StrCat(field, "[", i, "]"), paths[i]); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Where checkpoints go (ValidateNodePath); unset: no checkpoints.
absl::Status ValidateCheckpointDirectory(const std::string& directory) {
  if (directory.empty()) return absl::OkStatus();
  return ValidateNodePath("checkpoint.directory", directory);
}

// `.` and `..` applied, no trailing separator.
std::filesystem::path LexicallyNormal(const std::filesystem::path& path) {
  std::filesystem::path normal = path.lexically_normal();
  if (normal.has_relative_path() && normal.filename().empty()) normal = normal.parent_path();
  return normal;
}

}  // namespace

std::string ResolvedPath(const std::string& path) {
  std::error_code error;
  std::filesystem::path resolved = std::filesystem::weakly_canonical(path, error);
  if (error) resolved = std::filesystem::path(path);
  return LexicallyNormal(resolved).string();
}

bool ResolvedPathWithin(const std::string& directory, const std::string& root) {
  const std::filesystem::path dir = LexicallyNormal(directory), base = LexicallyNormal(root);
  if (!dir.is_absolute() || !base.is_absolute()) return false;
  auto d = dir.begin();
  for (auto b = base.begin(); b != base.end(); ++b, ++d) {
    if (d == dir.end() || *d != *b) return false;
  }
  return true;
}

absl::Status CheckCheckpointDirectoryUnder(const std::string& directory, const std::string& root) {
  if (root.empty() || !std::filesystem::path(root).is_absolute()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the checkpoint root '", root, "' is not an absolute path"));
  }
  const std::string dir = ResolvedPath(directory), base = ResolvedPath(root);
  if (ResolvedPathWithin(dir, base)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("checkpoint.directory ", directory,
                   directory == dir ? "" : absl::StrCat(" (", dir, ")"),
                   " is outside this worker's checkpoint root ", base, " (--checkpoint_root)"));
}

absl::Status CheckDatasetsUnder(const v1::DataSpec& data, const std::string& root) {
  if (root.empty() || !std::filesystem::path(root).is_absolute()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the data root '", root, "' is not an absolute path"));
  }
  const std::string base = ResolvedPath(root);
  for (const auto& [field, paths] :
       {std::pair{"data.train_shards", &data.train_shards()},
        std::pair{"data.validation_shards", &data.validation_shards()}}) {
    for (int i = 0; i < paths->size(); ++i) {
      const std::string& path = (*paths)[i];
      // The same words whether or not `path` exists: the refusal tells a
      // submitter nothing about the filesystem outside the root.
      if (!ResolvedPathWithin(ResolvedPath(path), base)) {
        return absl::PermissionDeniedError(
            absl::StrCat("spec.", field, "[", i, "]: ", path,
                         " is outside this worker's data root ", base, " (--data_root)"));
      }
      struct stat st;
      const std::string manifest = absl::StrCat(path, "/", data::kManifestFileName);
      if (stat(manifest.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return absl::FailedPreconditionError(
            absl::StrCat("spec.", field, "[", i, "]: no dataset at ", path, " (no ",
                         data::kManifestFileName,
                         "; prepare one with `corescape data prepare`)"));
      }
    }
  }
  return absl::OkStatus();
}

void ApplyJobDefaults(v1::JobSpec& spec) {
  const JobDefaults& d = kJobDefaults;
  if (spec.model().preset().empty()) spec.mutable_model()->set_preset(d.preset);
  v1::DataSpec& data = *spec.mutable_data();
  if (data.gradient_accumulation() == 0) data.set_gradient_accumulation(d.gradient_accumulation);
  if (data.sequence_length() == 0) data.set_sequence_length(d.sequence_length);
  if (data.micro_batch_size() == 0) data.set_micro_batch_size(d.micro_batch_size);
  v1::OptimizerSpec& opt = *spec.mutable_optimizer();
  const optim::AdamConfig adam;
  if (opt.name().empty()) opt.set_name(d.optimizer);
  if (opt.learning_rate() == 0) opt.set_learning_rate(d.learning_rate);
  if (opt.beta1() == 0) opt.set_beta1(adam.beta1);
  if (opt.beta2() == 0) opt.set_beta2(adam.beta2);
  if (opt.epsilon() == 0) opt.set_epsilon(adam.epsilon);
  // Explicit presence: 0 is the user turning clipping off.
  if (!opt.has_grad_clip()) opt.set_grad_clip(optim::kDefaultGradClip);
  if (opt.schedule().empty()) opt.set_schedule(d.schedule);
  if (IsSparse(opt.name()) && opt.scape().density() == 0) {
    opt.mutable_scape()->set_density(optim::kDefaultDensity);
  }
  if (IsSparse(opt.name()) && opt.scape().density_schedule().warmup_steps() > 0) {
    v1::DensitySchedule& schedule = *opt.mutable_scape()->mutable_density_schedule();
    const optim::DensitySchedule defaults;
    if (schedule.start() == 0) schedule.set_start(defaults.start);
    if (schedule.shape().empty()) schedule.set_shape(optim::DensityShapeName(defaults.shape));
  }
  v1::PlacementSpec& placement = *spec.mutable_placement();
  if (placement.workers() == 0) placement.set_workers(d.workers);
  if (placement.min_workers() == 0) placement.set_min_workers(placement.workers());
  v1::AttentionSpec& attention = *spec.mutable_attention();
  if (attention.mode() == v1::ATTENTION_MODE_UNSPECIFIED) attention.set_mode(v1::COLOCATED);
  if (attention.tolerance() == 0) attention.set_tolerance(d.attention_tolerance);
  // Keeping Q/K/V on the servers saves ~3x backward bytes; `false` only
  // when the spec says so (the field has explicit presence).
  if (!attention.has_keep_qkv_for_backward()) attention.set_keep_qkv_for_backward(true);
  // Ping-pong is DistCA's design: the workers compute while the servers
  // (in place: the other workers) attend. `false` only when the spec says so.
  if ((attention.mode() == v1::DISAGGREGATED || attention.mode() == v1::IN_PLACE) &&
      !attention.has_ping_pong()) {
    attention.set_ping_pong(true);
  }
  if (spec.device() == v1::DEVICE_UNSPECIFIED) spec.set_device(v1::CPU);
  if (spec.seed() == 0) spec.set_seed(d.seed);
  if (spec.name().empty()) spec.set_name(d.name);
}

namespace {

// ScapeConfig::Validate's refusal, named by the spec's field: its messages
// begin with the ScapeConfig field they refuse ("scape: density must be in
// (0, 1]", "density_schedule.start: must be in (0, 1]"), which a ScapeSpec
// names alike; a message naming no ScapeSpec field names the section.
absl::Status AsScapeSpecError(const absl::Status& status) {
  absl::string_view message = absl::StripPrefix(status.message(), "scape: ");
  const size_t end = std::min(message.find_first_of(" :"), message.size());
  const absl::string_view field = message.substr(0, end);
  const google::protobuf::Descriptor* section = v1::ScapeSpec::descriptor();
  for (absl::string_view part : absl::StrSplit(field, '.')) {
    const google::protobuf::FieldDescriptor* named =
        section == nullptr ? nullptr : section->FindFieldByName(std::string(part));
    if (named == nullptr) return Invalid("optimizer.scape", message);
    section = named->message_type();
  }
  const absl::string_view why =
      absl::StripLeadingAsciiWhitespace(absl::StripPrefix(message.substr(end), ":"));
  return Invalid(absl::StrCat("optimizer.scape.", field), why);
}

// A sparse optimizer's settings: which optimizer may take which here (the
// spec's own rules), the values themselves by ScapeConfig::Validate on the
// one translation (ScapeConfigFromSpec).
absl::Status ValidateSparseSettings(const v1::OptimizerSpec& opt) {
  const v1::ScapeSpec& scape = opt.scape();
  const bool is_scape = opt.name() == optim::OptimizerName(optim::OptimizerKind::kScape);
  if (!scape.rule().empty() && !UsesMaskEpochs(opt.name())) {
    return Invalid("optimizer.scape.rule", absl::StrCat("'", opt.name(), "' has no SCAPE rule"));
  }
  if (scape.offload_residuals() && !UsesMaskEpochs(opt.name())) {
    return Invalid("optimizer.scape.offload_residuals",
                   absl::StrCat("'", opt.name(), "' keeps all its state in host memory"));
  }
  if (scape.per_tensor_masks() && !is_scape) {
    return Invalid("optimizer.scape.per_tensor_masks", "only optimizer scape has per-tensor masks");
  }
  auto config = ScapeConfigFromSpec(opt);
  if (!config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("spec.", config.status().message()));
  }
  if (config->rule == optim::ScapeRule::kReference && !is_scape) {
    return Invalid("optimizer.scape.rule", "reference needs per-tensor masks: optimizer scape");
  }
  if (absl::Status s = config->Validate(); !s.ok()) return AsScapeSpecError(s);
  // Without warm-up steps ScapeConfigFromSpec reads no schedule; its counts
  // are refused all the same when negative.
  if (scape.density_schedule().warmup_steps() <= 0) {
    optim::DensitySchedule counts;
    counts.warmup_steps = scape.density_schedule().warmup_steps();
    counts.start_step = scape.density_schedule().start_step();
    if (absl::Status s = counts.Validate(); !s.ok()) return AsScapeSpecError(s);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateJobSpec(const v1::JobSpec& spec) {
  if (spec.name().size() > 128) return Invalid("name", "longer than 128 bytes");
  if (std::optional<std::string> unsafe = FirstUnsafeCharacter(spec.name())) {
    return Invalid("name", absl::StrCat("holds a ", *unsafe,
                                        " (names are printable text: no control, escape or "
                                        "bidirectional characters)"));
  }
  if (!v1::Device_IsValid(spec.device())) {
    return Invalid("device", absl::StrCat("unknown device ", static_cast<int>(spec.device()),
                                          " (", JobDeviceNames(), ")"));
  }
  // Remote executors read Q/K/V from host memory; a GPU step keeps them on
  // the device (docs/gpu.md).
  if (spec.device() == v1::CUDA && (spec.attention().mode() == v1::DISAGGREGATED ||
                                    spec.attention().mode() == v1::IN_PLACE)) {
    return Invalid("attention.mode",
                   absl::StrCat(v1::AttentionMode_Name(spec.attention().mode()),
                                " is not available with device: cuda (its core attention runs "
                                "colocated, on the GPU)"));
  }
  const v1::ModelSpec& m = spec.model();
  for (const auto& [field, size] :
       {std::pair{"n_layers", m.n_layers()}, {"d_model", m.d_model()}, {"n_heads", m.n_heads()},
        {"n_kv_heads", m.n_kv_heads()}, {"d_ff", m.d_ff()}, {"vocab_size", m.vocab_size()},
        {"max_seq_len", m.max_seq_len()}}) {
    if (size < 0) {
      return Invalid(absl::StrCat("model.", field),
                     absl::StrCat("must not be negative (0 keeps the preset's value), got ", size));
    }
  }
  auto model = ModelConfigFromSpec(m);
  if (!model.ok()) return Invalid("model.preset", model.status().message());
  const model::ModelConfig& config = *model;
  if (absl::Status s = config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("spec.", s.message()));
  }
  if (const int64_t parameters = config.ParameterCount(); parameters > kMaxModelParameters) {
    return Invalid("model", absl::StrCat(config.ToString(), " has ", parameters,
                                         " parameters, more than any job may train (",
                                         kMaxModelParameters, ")"));
  }

  const v1::DataSpec& data = spec.data();
  if (absl::Status s = ValidateDataPaths("data.train_shards", data.train_shards(), true); !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ValidateDataPaths("data.validation_shards", data.validation_shards(), false);
      !s.ok()) {
    return s;
  }
  if (data.sequence_length() <= 0) return Invalid("data.sequence_length", "must be positive");
  if (data.sequence_length() > config.max_seq_len) {
    return Invalid("data.sequence_length",
                   absl::StrCat(data.sequence_length(), " is longer than the model allows (",
                                config.max_seq_len, ")"));
  }
  if (data.micro_batch_size() <= 0 || data.micro_batch_size() > 65536) {
    return Invalid("data.micro_batch_size", "must be in [1, 65536]");
  }
  if (int64_t{data.micro_batch_size()} * data.sequence_length() > model::kMaxMicroBatchTokens) {
    return Invalid("data.micro_batch_size",
                   absl::StrCat(data.micro_batch_size(), " sequences of ", data.sequence_length(),
                                " tokens are more than one micro-batch may hold (",
                                model::kMaxMicroBatchTokens, " tokens)"));
  }
  if (data.gradient_accumulation() <= 0 || data.gradient_accumulation() > 65536) {
    return Invalid("data.gradient_accumulation", "must be in [1, 65536]");
  }

  const v1::OptimizerSpec& opt = spec.optimizer();
  if (auto traits = optim::FindOptimizer(opt.name()); !traits.ok()) {
    return Invalid("optimizer.name", traits.status().message());
  }
  if (!(opt.learning_rate() > 0 && opt.learning_rate() < 10)) {
    return Invalid("optimizer.learning_rate", "must be in (0, 10)");
  }
  if (!(opt.min_learning_rate() >= 0 && opt.min_learning_rate() <= opt.learning_rate())) {
    return Invalid("optimizer.min_learning_rate", "must be in [0, learning_rate]");
  }
  if (!(opt.beta1() >= 0 && opt.beta1() < 1)) return Invalid("optimizer.beta1", "must be in [0, 1)");
  if (!(opt.beta2() >= 0 && opt.beta2() < 1)) return Invalid("optimizer.beta2", "must be in [0, 1)");
  if (!(opt.epsilon() > 0)) return Invalid("optimizer.epsilon", "must be positive");
  if (!(opt.weight_decay() >= 0 && opt.weight_decay() < 1)) {
    return Invalid("optimizer.weight_decay", "must be in [0, 1)");
  }
  if (!(opt.grad_clip() >= 0)) return Invalid("optimizer.grad_clip", "must not be negative");
  if (opt.schedule() != "constant" && opt.schedule() != "linear" && opt.schedule() != "cosine") {
    return Invalid("optimizer.schedule",
                   absl::StrCat("unknown schedule '", opt.schedule(), "' (constant, linear, cosine)"));
  }
  if (opt.warmup_steps() < 0) return Invalid("optimizer.warmup_steps", "must not be negative");
  if (IsSparse(opt.name())) {
    if (absl::Status s = ValidateSparseSettings(opt); !s.ok()) return s;
  }

  if (spec.steps() <= 0) return Invalid("steps", "must be positive");
  if (spec.steps() > 100'000'000) return Invalid("steps", "must be at most 100000000");
  if (spec.eval_interval_steps() < 0) return Invalid("eval_interval_steps", "must not be negative");
  const v1::CheckpointSpec& checkpoint = spec.checkpoint();
  if (checkpoint.interval_steps() < 0) {
    return Invalid("checkpoint.interval_steps", "must not be negative");
  }
  if (checkpoint.interval_steps() > 0 && checkpoint.directory().empty()) {
    return Invalid("checkpoint.directory", "required when checkpoint.interval_steps > 0");
  }
  if (checkpoint.keep() < 0) return Invalid("checkpoint.keep", "must not be negative");
  if (absl::Status s = ValidateCheckpointDirectory(checkpoint.directory()); !s.ok()) return s;

  const v1::PlacementSpec& placement = spec.placement();
  if (placement.workers() <= 0) return Invalid("placement.workers", "must be positive");
  if (placement.workers() > kMaxJobWorkers) {
    return Invalid("placement.workers",
                   absl::StrCat(placement.workers(), " is more than any job may use (",
                                kMaxJobWorkers, ")"));
  }
  if (placement.min_workers() <= 0 || placement.min_workers() > placement.workers()) {
    return Invalid("placement.min_workers", "must be in [1, placement.workers]");
  }
  if (!placement.node_names().empty() && placement.node_names_size() != placement.workers()) {
    return Invalid("placement.node_names", "must name exactly placement.workers nodes");
  }
  std::set<absl::string_view> node_names;
  for (int i = 0; i < placement.node_names_size(); ++i) {
    if (!node_names.insert(placement.node_names(i)).second) {
      return Invalid(absl::StrCat("placement.node_names[", i, "]"),
                     absl::StrCat("'", placement.node_names(i),
                                  "' is named twice (one rank per node)"));
    }
  }

  const v1::AttentionSpec& attention = spec.attention();
  if (!v1::AttentionMode_IsValid(attention.mode())) {
    return Invalid("attention.mode", "unknown attention mode");
  }
  if (attention.mode() == v1::DISAGGREGATED && attention.attention_servers() <= 0) {
    return Invalid("attention.attention_servers", "must be positive in DISAGGREGATED mode");
  }
  // Refused rather than ignored: a job asking for servers it would not use
  // is most likely meant to be DISAGGREGATED.
  if (attention.mode() == v1::IN_PLACE && attention.attention_servers() != 0) {
    return Invalid("attention.attention_servers",
                   absl::StrCat("must be 0 in IN_PLACE mode (the job's workers serve its "
                                "attention), not ",
                                attention.attention_servers()));
  }
  if (attention.attention_servers() < 0 || attention.attention_servers() > 4096) {
    return Invalid("attention.attention_servers", "must be in [0, 4096]");
  }
  if (!(attention.tolerance() >= 0 && attention.tolerance() < 1)) {
    return Invalid("attention.tolerance", "must be in [0, 1)");
  }
  return absl::OkStatus();
}

absl::StatusOr<ResolvedJobSpec> ResolveJobSpec(v1::JobSpec spec) {
  ApplyJobDefaults(spec);
  return CheckResolvedJobSpec(std::move(spec));
}

absl::StatusOr<ResolvedJobSpec> CheckResolvedJobSpec(v1::JobSpec spec) {
  if (absl::Status s = ValidateJobSpec(spec); !s.ok()) return s;
  return ResolvedJobSpec(std::move(spec));
}

}  // namespace corescape::job
