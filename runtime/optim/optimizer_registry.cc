#include "runtime/optim/optimizer_registry.h"

#include "absl/strings/str_cat.h"

namespace corescape::optim {

absl::Status ValidateTopKAdamWOptions(const OptimizerOptions& options) {
  if (absl::Status s = CheckDensity(options.scape.density); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("topk-adamw: density ", s.message()));
  }
  return options.scape.density_schedule.Validate();
}

absl::StatusOr<std::unique_ptr<DataParallelOptimizer>> CreateOptimizer(
    const OptimizerOptions& options, RankGroup* group, DecayMask decay_mask,
    std::vector<int64_t> tensor_bounds, std::unique_ptr<ScapeStateStore> state_store) {
  auto traits = FindOptimizer(options.name);
  if (!traits.ok()) return traits.status();
  const OptimizerKind kind = (*traits)->kind;
  if (state_store != nullptr && kind != OptimizerKind::kScape &&
      kind != OptimizerKind::kScapeGlobal) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", options.name, "' keeps no SCAPE state"));
  }
  switch (kind) {
    case OptimizerKind::kAdamW:
      return std::make_unique<DenseAdamWDataParallel>(group, options.adam, std::move(decay_mask),
                                                      options.grad_clip);
    case OptimizerKind::kAdamS:
      return std::make_unique<DenseAdamSDataParallel>(group, options.adam, std::move(decay_mask));
    case OptimizerKind::kTopKAdamW:
      if (absl::Status s = ValidateTopKAdamWOptions(options); !s.ok()) return s;
      return std::make_unique<TopKGradientAdamW>(group, options.adam, std::move(decay_mask),
                                                 options.scape.density,
                                                 options.scape.density_schedule,
                                                 options.scape.dense_warmup_steps);
    case OptimizerKind::kScape:
    case OptimizerKind::kScapeGlobal: {
      ScapeConfig scape = options.scape;
      scape.adams = options.adam;
      scape.grad_clip = options.grad_clip;
      scape.scope = kind == OptimizerKind::kScape ? MaskScope::kPartitioned
                                                  : MaskScope::kWholeBuffer;
      auto optimizer = ScapeOptimizer::Create(group, scape, std::move(decay_mask),
                                             std::move(tensor_bounds), std::move(state_store));
      if (!optimizer.ok()) return optimizer.status();
      return std::unique_ptr<DataParallelOptimizer>(*std::move(optimizer));
    }
  }
  return absl::InternalError("unhandled optimizer kind");
}

}  // namespace corescape::optim
