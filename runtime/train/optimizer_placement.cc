#include "runtime/train/optimizer_placement.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/train/device_dense_optimizer.h"
#include "runtime/train/device_scape_store.h"
#include "runtime/train/device_topk_adamw.h"

namespace corescape::train {

absl::StatusOr<PlacedOptimizer> CreatePlacedOptimizer(optim::OptimizerOptions options,
                                                      optim::RankGroup* group, GroupUse group_use,
                                                      model::ModelOps& backend,
                                                      optim::DecayMask decay_mask,
                                                      std::vector<int64_t> tensor_bounds) {
  options.scape.mask_sending =
      group_use == GroupUse::kOptimizerAlone || group->world_size() == 1
          ? optim::MaskSending::kOnThread
          : optim::MaskSending::kOnCaller;
  auto traits = optim::FindOptimizer(options.name);
  if (!traits.ok()) return traits.status();
  const bool device_backend = !backend.parameters_in_place();
  const std::string device = backend.device().ToString();
  PlacedOptimizer placed;
  const optim::OptimizerKind kind = (*traits)->kind;
  if (device_backend &&
      (DeviceDenseOptimizer::Supports(kind) || kind == optim::OptimizerKind::kTopKAdamW)) {
    absl::StatusOr<std::unique_ptr<optim::DataParallelOptimizer>> optimizer;
    if (kind == optim::OptimizerKind::kTopKAdamW) {
      optimizer = DeviceTopKAdamW::Create(options, group, &backend, std::move(decay_mask));
    } else {
      optimizer = DeviceDenseOptimizer::Create(options, group, &backend, std::move(decay_mask));
    }
    if (!optimizer.ok()) return optimizer.status();
    placed.optimizer = *std::move(optimizer);
    placed.on_device = true;
    placed.placement = absl::StrCat("state on ", device, " beside the parameters");
    return placed;
  }
  std::unique_ptr<optim::ScapeStateStore> store;
  if (device_backend && DeviceScapeStore::Supports(options)) {
    const bool offload = options.scape.offload_residuals;
    auto created = DeviceScapeStore::Create(&backend, decay_mask, options.scape.rule,
                                            offload ? DeviceScapeStore::ResidualPlacement::kPinnedHost
                                                    : DeviceScapeStore::ResidualPlacement::kDevice);
    if (!created.ok()) return created.status();
    store = *std::move(created);
    placed.on_device = true;
    placed.placement = absl::StrCat(
        "state on ", device, " beside the parameters",
        offload ? ", residuals in pinned host memory (staged each step)" : "");
  } else if (device_backend) {
    placed.placement = absl::StrCat("on the host (each step downloads the gradients from ", device,
                                    " and uploads the parameters)");
  } else if (options.scape.offload_residuals) {
    placed.placement = "offload_residuals has nothing to move (the CPU backend's state is host memory)";
  }
  auto optimizer = optim::CreateOptimizer(options, group, std::move(decay_mask),
                                          std::move(tensor_bounds), std::move(store));
  if (!optimizer.ok()) return optimizer.status();
  placed.optimizer = *std::move(optimizer);
  return placed;
}

}  // namespace corescape::train
