#ifndef CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_REGISTRY_H_
#define CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_REGISTRY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/optim/adam_config.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/optim/rank_group.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::optim {

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
  // Its `adams`, `scope` and `grad_clip` (the reference rule clips ĝ
  // itself) are set from `adam`, `name` and `grad_clip`.
  ScapeConfig scape;
};

// topk-adamw's own options (its density in (0, 1] and density schedule),
// checked wherever one is built. INVALID_ARGUMENT naming the field.
absl::Status ValidateTopKAdamWOptions(const OptimizerOptions& options);

// The optimizer `options.name` names, over `group`. `tensor_bounds` are the
// T + 1 offsets of the buffer's tensors (empty: one tensor), for per-tensor
// masks. `state_store` (null: host memory) holds SCAPE's
// state elsewhere (ScapeOptimizer::Create). INVALID_ARGUMENT for an unknown
// name or a configuration the optimizer refuses.
absl::StatusOr<std::unique_ptr<DataParallelOptimizer>> CreateOptimizer(
    const OptimizerOptions& options, RankGroup* group, DecayMask decay_mask,
    std::vector<int64_t> tensor_bounds = {},
    std::unique_ptr<ScapeStateStore> state_store = nullptr);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_OPTIMIZER_REGISTRY_H_
