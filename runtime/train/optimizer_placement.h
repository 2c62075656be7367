#ifndef CORESCAPE_RUNTIME_TRAIN_OPTIMIZER_PLACEMENT_H_
#define CORESCAPE_RUNTIME_TRAIN_OPTIMIZER_PLACEMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/optim/rank_group.h"

namespace corescape::train {

struct PlacedOptimizer {
  std::unique_ptr<optim::DataParallelOptimizer> optimizer;
  // Its Step takes the backend's parameter and gradient buffers (not the
  // host vectors): the state lives beside them.
  bool on_device = false;
  // One line on where the state lives, for the job's log.
  std::string placement;
};

// Whether anything but the optimizer issues collectives on its group between
// the optimizer's steps (a trainer's token counts and losses).
enum class GroupUse { kOptimizerAlone, kSharedBetweenSteps };

// The optimizer `options` names for a model on `backend`: on a device
// backend with its state beside the parameters where a device form exists
// (AdamW and AdamS: DeviceDenseOptimizer; topk-adamw: DeviceTopKAdamW;
// SCAPE's reference and catch-up rules: DeviceScapeStore, the residual in
// pinned host memory under offload_residuals), on the host otherwise. SCAPE's mask exchange encodes
// and issues its collectives on its own thread, off the step's path, where
// `group_use` lets it (or there are no peers to agree on an order with).
absl::StatusOr<PlacedOptimizer> CreatePlacedOptimizer(optim::OptimizerOptions options,
                                                      optim::RankGroup* group, GroupUse group_use,
                                                      model::ModelOps& backend,
                                                      optim::DecayMask decay_mask,
                                                      std::vector<int64_t> tensor_bounds);

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_OPTIMIZER_PLACEMENT_H_
