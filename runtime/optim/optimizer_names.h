#ifndef CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_NAMES_H_
#define CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_NAMES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

// The optimizer registry's names and traits (optimizer_registry.h adds
// construction); the optimizers themselves take their names from here.
namespace corescape::optim {

// The one list of optimizers a job spec, train-local or the SCAPE tool can
// name. Everything that needs to know what a name means asks here.
enum class OptimizerKind { kAdamW, kAdamS, kScape, kScapeGlobal, kTopKAdamW };

struct OptimizerTraits {
  OptimizerKind kind;
  const char* name;
  const char* description;
  // Sends only a fraction of the buffer per step: ScapeConfig::density
  // (optimizer.scape.density in a job spec) applies.
  bool sparse;
  // Its masks follow the scheduler's mask epochs (partition map, dense
  // steps, residual syncs).
  bool uses_mask_epochs;
  // Clips the synchronized gradient to OptimizerOptions::grad_clip before
  // stepping on it. AdamS-based optimizers bound each step by their
  // normalizer instead; topk-adamw steps on a sparse sum.
  bool clips_gradients;
};

// Every optimizer, in the order help texts list them.
absl::Span<const OptimizerTraits> Optimizers();
std::vector<std::string> OptimizerNames();
// "adamw, adams, scape, scape-global, topk-adamw".
std::string OptimizerNameList();
// INVALID_ARGUMENT "unknown optimizer 'x' (adamw, adams, ...)".
absl::StatusOr<const OptimizerTraits*> FindOptimizer(absl::string_view name);
// The name of `kind` (every kind has one).
const char* OptimizerName(OptimizerKind kind);

// What a job that names no optimizer trains with.
inline constexpr const char* kDefaultOptimizer = "adamw";

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_NAMES_H_
