#include "runtime/optim/optimizer_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace corescape::optim {
namespace {

constexpr OptimizerTraits kOptimizers[] = {
    {OptimizerKind::kAdamW, "adamw", "dense AdamW (gradient all-reduce)", false, false, true},
    {OptimizerKind::kAdamS, "adams", "dense AdamS (gradient all-reduce, no second moment)",
     false, false, false},
    {OptimizerKind::kScape, "scape",
     "AdamS with SCAPE sparse first-moment communication (partitioned masks)", true, true, false},
    {OptimizerKind::kScapeGlobal, "scape-global",
     "baseline: SCAPE with each rank's global top-k mask, all-gathered", true, true, false},
    {OptimizerKind::kTopKAdamW, "topk-adamw",
     "baseline: top-k raw gradients with error feedback feeding AdamW", true, false, false},
};

}  // namespace

absl::Span<const OptimizerTraits> Optimizers() { return kOptimizers; }

std::vector<std::string> OptimizerNames() {
  std::vector<std::string> names;
  for (const OptimizerTraits& traits : kOptimizers) names.push_back(traits.name);
  return names;
}

std::string OptimizerNameList() { return absl::StrJoin(OptimizerNames(), ", "); }

absl::StatusOr<const OptimizerTraits*> FindOptimizer(absl::string_view name) {
  for (const OptimizerTraits& traits : kOptimizers) {
    if (name == traits.name) return &traits;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", name, "' (", OptimizerNameList(), ")"));
}

absl::StatusOr<std::unique_ptr<DataParallelOptimizer>> CreateOptimizer(
    const OptimizerOptions& options, RankGroup* group, DecayMask decay_mask) {
  auto traits = FindOptimizer(options.name);
  if (!traits.ok()) return traits.status();
  switch ((*traits)->kind) {
    case OptimizerKind::kAdamW:
      return std::make_unique<DenseAdamWDataParallel>(group, options.adam, std::move(decay_mask),
                                                      options.grad_clip);
    case OptimizerKind::kAdamS:
      return std::make_unique<DenseAdamSDataParallel>(group, options.adam, std::move(decay_mask));
    case OptimizerKind::kTopKAdamW:
      if (!(options.scape.density > 0 && options.scape.density <= 1)) {
        return absl::InvalidArgumentError("topk-adamw: density must be in (0, 1]");
      }
      return std::make_unique<TopKGradientAdamW>(group, options.adam, std::move(decay_mask),
                                                 options.scape.density);
    case OptimizerKind::kScape:
    case OptimizerKind::kScapeGlobal: {
      ScapeConfig scape = options.scape;
      scape.adams = options.adam;
      scape.scope = (*traits)->kind == OptimizerKind::kScape ? MaskScope::kPartitioned
                                                             : MaskScope::kWholeBuffer;
      auto optimizer = ScapeOptimizer::Create(group, scape, std::move(decay_mask));
      if (!optimizer.ok()) return optimizer.status();
      return std::unique_ptr<DataParallelOptimizer>(*std::move(optimizer));
    }
  }
  return absl::InternalError("unhandled optimizer kind");
}

}  // namespace corescape::optim
