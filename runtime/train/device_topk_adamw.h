#ifndef CORESCAPE_RUNTIME_TRAIN_DEVICE_TOPK_ADAMW_H_
#define CORESCAPE_RUNTIME_TRAIN_DEVICE_TOPK_ADAMW_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/optim/rank_group.h"

namespace corescape::train {

// topk-adamw (optim::TopKGradientAdamW: raw-gradient top-k with error
// feedback feeding AdamW) with its residual and moments in a model backend's
// memory beside the parameters. Per sparse step the residual takes the
// gradient, its k largest magnitudes are selected and packed on the device
// (the residual zeroed there), and only the k picks (indices and values)
// come to the host for the exchange (optim::AllGatherSparseSum); the union's
// sums go back up, are scattered into the gradient buffer and AdamW runs
// there. A dense step (warm-up, or the schedule at density 1) all-reduces
// the residual where it is. The bits are the host form's (same selection
// rule, same sums, same AdamW body) and so is the checkpoint format, so a
// state saved by either restores into the other.
//
// Step takes the backend's buffers (Transformer::BackendParameters and
// BackendGradients) and overwrites the gradient buffer.
class DeviceTopKAdamW final : public optim::DataParallelOptimizer {
 public:
  // INVALID_ARGUMENT for options another optimizer's or topk-adamw refuses
  // (optim::ValidateTopKAdamWOptions); the backend's errors (out of memory)
  // for the state.
  static absl::StatusOr<std::unique_ptr<DeviceTopKAdamW>> Create(
      const optim::OptimizerOptions& options, optim::RankGroup* group, model::ModelOps* ops,
      optim::DecayMask decay_mask);

  std::string name() const override { return optim::OptimizerName(optim::OptimizerKind::kTopKAdamW); }
  absl::Status Step(float* params, float* grads, int64_t size, double lr) override;
  absl::StatusOr<std::string> SaveState() override;
  absl::Status RestoreState(absl::string_view state) override;
  int64_t step_count() const override { return step_; }
  // Downloads the moment (empty, logged, if the download fails).
  const std::vector<float>& first_moment() const override;
  // Coordinates the last sparse step updated from the ranks' picks.
  int64_t last_union_size() const { return last_union_size_; }

 private:
  DeviceTopKAdamW(const optim::OptimizerOptions& options, optim::RankGroup* group,
                  model::ModelOps* ops, int64_t size)
      : options_(options), group_(group), ops_(ops), size_(size) {}
  absl::Status DenseStep(float* params, double lr);
  absl::Status SparseStep(float* params, float* grads, int64_t k, double lr);
  absl::Status Update(float* params, const float* grads, double lr);

  optim::OptimizerOptions options_;
  optim::RankGroup* group_;
  model::ModelOps* ops_;
  int64_t size_;
  int64_t step_ = 0;
  int64_t last_union_size_ = 0;
  device::DeviceBuffer m_, v_, residual_, decays_;
  // The k picks (indices, values) on the device, and the union's going back.
  device::DeviceBuffer picked_, picked_values_, union_, union_values_;
  mutable std::vector<float> first_moment_download_;
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_DEVICE_TOPK_ADAMW_H_
