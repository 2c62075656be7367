#include "runtime/job/trainer_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/job/job_spec.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::job {

absl::StatusOr<train::TrainerConfig> TrainerConfigFromSpec(const ResolvedJobSpec& resolved) {
  const v1::JobSpec& spec = resolved.spec();
  auto model = ModelConfigFromSpec(spec.model());
  if (!model.ok()) return model.status();
  train::TrainerConfig config;
  config.model = *model;
  const v1::DataSpec& data = spec.data();
  config.train_data.assign(data.train_shards().begin(), data.train_shards().end());
  config.validation_data.assign(data.validation_shards().begin(), data.validation_shards().end());
  config.seq_len = data.sequence_length();
  config.micro_batch = data.micro_batch_size();
  config.grad_accum = data.gradient_accumulation();
  config.steps = spec.steps();
  config.seed = spec.seed();

  const v1::OptimizerSpec& opt = spec.optimizer();
  auto traits = optim::FindOptimizer(opt.name());
  if (!traits.ok()) return traits.status();
  optim::OptimizerOptions& o = config.optimizer;
  o.name = opt.name();
  o.adam = {opt.beta1(), opt.beta2(), opt.epsilon(), opt.weight_decay()};
  o.grad_clip = opt.grad_clip();
  if ((*traits)->sparse) {
    auto scape = ScapeConfigFromSpec(opt);
    if (!scape.ok()) return scape.status();
    o.scape = *std::move(scape);
  }
  auto kind = optim::LrSchedule::ParseKind(opt.schedule());
  if (!kind.ok()) return kind.status();
  config.schedule.kind = *kind;
  config.schedule.peak_lr = opt.learning_rate();
  config.schedule.min_lr = opt.min_learning_rate();
  config.schedule.warmup_steps = opt.warmup_steps();
  config.schedule.total_steps = spec.steps();
  // Ping-pong overlaps the halves' remote (or peer-served) attention;
  // COLOCATED jobs run micro-batches whole.
  config.ping_pong = (spec.attention().mode() == v1::DISAGGREGATED ||
                      spec.attention().mode() == v1::IN_PLACE) &&
                     spec.attention().ping_pong();
  return config;
}

absl::StatusOr<train::TrainerConfig> TrainerConfigForAssignment(
    const v1::JobAssignment& assignment, int threads) {
  auto spec = CheckResolvedJobSpec(assignment.spec());
  if (!spec.ok()) return spec.status();
  auto config = TrainerConfigFromSpec(*spec);
  if (!config.ok()) return config.status();
  if (assignment.gradient_accumulation() > 0) {
    config->grad_accum = assignment.gradient_accumulation();
  }
  // Masks carry the generation unless the scheduler's mask epoch says more.
  config->optimizer.scape.mask_epoch = assignment.generation();
  if (UsesMaskEpochs(assignment.spec().optimizer().name())) {
    // The scheduler's mask epoch: partition map, dense steps, the number
    // masks carry. Without one the ranks could disagree on the partition.
    const v1::MaskEpochCommand& epoch = assignment.mask_epoch();
    if (epoch.epoch() <= 0 || epoch.world_size() != assignment.world_size() ||
        epoch.generation() != assignment.generation()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SCAPE assignment of job ", assignment.job_id(), " carries no valid mask epoch (epoch ",
          epoch.epoch(), " for ", epoch.world_size(), " ranks of generation ", epoch.generation(),
          "; the assignment is generation ", assignment.generation(), " of ",
          assignment.world_size(), " ranks)"));
    }
    optim::ScapeConfig& scape = config->optimizer.scape;
    scape.mask_epoch = static_cast<uint64_t>(epoch.epoch());
    scape.partition_bounds.assign(epoch.partition_bounds().begin(),
                                  epoch.partition_bounds().end());
    scape.residual_sync_period = epoch.residual_sync_period();
    scape.forced_dense_steps.assign(epoch.forced_dense_steps().begin(),
                                    epoch.forced_dense_steps().end());
  }
  config->threads = threads;
  return config;
}

std::string DescribeTrainerConfig(const train::TrainerConfig& config) {
  const optim::OptimizerOptions& o = config.optimizer;
  nlohmann::json optimizer = {
      {"name", o.name},
      {"beta1", o.adam.beta1},
      {"beta2", o.adam.beta2},
      {"epsilon", o.adam.epsilon},
      {"weight_decay", o.adam.weight_decay},
  };
  auto traits = optim::FindOptimizer(o.name);
  // The reference rule clips its reconstructed gradient itself.
  if (traits.ok() && ((*traits)->clips_gradients ||
                      ((*traits)->uses_mask_epochs && o.scape.rule == optim::ScapeRule::kReference))) {
    optimizer["grad_clip"] = o.grad_clip;
  }
  const optim::DensitySchedule& schedule = o.scape.density_schedule;
  const nlohmann::json density_schedule = {{"start", schedule.start},
                                           {"warmup_steps", schedule.warmup_steps},
                                           {"start_step", schedule.start_step},
                                           {"shape", optim::DensityShapeName(schedule.shape)}};
  if (traits.ok() && (*traits)->sparse && !(*traits)->uses_mask_epochs) {
    // topk-adamw: density, schedule and dense warm-up only.
    optimizer["scape"] = {{"density", o.scape.density},
                          {"dense_warmup_steps", o.scape.dense_warmup_steps},
                          {"density_schedule", density_schedule}};
  } else if (traits.ok() && (*traits)->sparse) {
    // The settings a job spec can reach, and the formulation it trains with.
    optimizer["scape"] = {
        {"density", o.scape.density},
        {"dense_warmup_steps", o.scape.WarmupSteps()},
        {"dense_refresh_interval", o.scape.dense_refresh_interval},
        {"density_schedule", density_schedule},
        {"rule", optim::ScapeRuleName(o.scape.rule)},
        {"per_tensor_masks", o.scape.PerTensor()},
        {"dense_small_tensors", o.scape.dense_small_tensors},
        {"catch_up_exponent", o.scape.catch_up_exponent},
        {"mask_statistic", optim::MaskStatisticName(o.scape.statistic)},
        {"mask_epoch", o.scape.mask_epoch},
        {"partition_bounds", o.scape.partition_bounds},
        {"residual_sync_period", o.scape.residual_sync_period},
        {"forced_dense_steps", o.scape.forced_dense_steps},
    };
  }
  const model::ModelConfig& m = config.model;
  nlohmann::json json = {
      {"model",
       {{"n_layers", m.n_layers},
        {"d_model", m.d_model},
        {"n_heads", m.n_heads},
        {"n_kv_heads", m.n_kv_heads},
        {"d_ff", m.d_ff},
        {"vocab_size", m.vocab_size},
        {"max_seq_len", m.max_seq_len},
        {"rope_theta", m.rope_theta},
        {"norm_eps", m.norm_eps},
        {"tie_embeddings", m.tie_embeddings}}},
      {"train_data", config.train_data},
      {"validation_data", config.validation_data},
      {"seq_len", config.seq_len},
      {"micro_batch", config.micro_batch},
      {"grad_accum", config.grad_accum},
      {"steps", config.steps},
      {"seed", config.seed},
      {"optimizer", optimizer},
      {"schedule",
       {{"kind", optim::LrSchedule::KindName(config.schedule.kind)},
        {"peak_lr", config.schedule.peak_lr},
        {"min_lr", config.schedule.min_lr},
        {"warmup_steps", config.schedule.warmup_steps},
        {"total_steps", config.schedule.total_steps}}},
      {"ping_pong", config.ping_pong},
  };
  return json.dump(2) + "\n";
}

}  // namespace corescape::job
