#include "runtime/optim/optimizer_names.h"

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

const char* OptimizerName(OptimizerKind kind) {
  for (const OptimizerTraits& traits : kOptimizers) {
    if (traits.kind == kind) return traits.name;
  }
  return "?";
}

}  // namespace corescape::optim
