#ifndef CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_REGISTRY_H_
#define CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/optim/adam_config.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/rank_group.h"
#include "runtime/optim/scape_optimizer.h"

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

// What a job that names no optimizer trains with.
inline constexpr const char* kDefaultOptimizer = "adamw";

// Gradient clipping's default: the global L2 norm of the synchronized
// gradient is at most 1.0 (0 turns it off).
inline constexpr double kDefaultGradClip = 1.0;

// Everything that builds one rank's optimizer.
struct OptimizerOptions {
  std::string name = kDefaultOptimizer;
  AdamConfig adam;                     // every optimizer's β1, β2, ε, weight decay
  double grad_clip = kDefaultGradClip;  // where traits.clips_gradients; <= 0: off
  // Sparse optimizers: density (scape, scape-global, topk-adamw) and the
  // SCAPE formulation, mask statistic and mask epoch (scape, scape-global).
  // Its `adams` and `scope` are set from `adam` and `name`.
  ScapeConfig scape;
};

// The optimizer `options.name` names, over `group`. INVALID_ARGUMENT for an
// unknown name or a configuration the optimizer refuses.
absl::StatusOr<std::unique_ptr<DataParallelOptimizer>> CreateOptimizer(
    const OptimizerOptions& options, RankGroup* group, DecayMask decay_mask);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_REGISTRY_H_
