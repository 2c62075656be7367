#ifndef CORESCAPE_RUNTIME_TRAIN_DEVICE_DENSE_OPTIMIZER_H_
#define CORESCAPE_RUNTIME_TRAIN_DEVICE_DENSE_OPTIMIZER_H_

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

// A dense data-parallel optimizer (adamw, clipping the synchronized
// gradient; or adams) whose moments live in a model backend's memory beside
// the parameters: the gradient is all-reduced where it is (NCCL on a GPU,
// RankGroup::AllReduceSumOnDevice; AllReduceSum when the backend's memory is
// the host's), clipped and applied there, and nothing crosses to the host
// during a step but the norm. It runs the host optimizers' per-coordinate
// bodies (kernels/cuda/optim_updates.h) and saves their checkpoint format
// (optim::EncodeAdamState), so a state saved here restores into the host
// optimizer and back.
//
// Step takes the backend's buffers (Transformer::BackendParameters and
// BackendGradients), not host ones.
class DeviceDenseOptimizer final : public optim::DataParallelOptimizer {
 public:
  // Whether `kind` has a form that runs on a device.
  static bool Supports(optim::OptimizerKind kind);

  // INVALID_ARGUMENT for an optimizer without a device form (naming it) or
  // a decay mask of the wrong size; the backend's errors (out of memory)
  // for the state.
  static absl::StatusOr<std::unique_ptr<DeviceDenseOptimizer>> Create(
      const optim::OptimizerOptions& options, optim::RankGroup* group, model::ModelOps* ops,
      optim::DecayMask decay_mask);

  std::string name() const override { return optim::OptimizerName(kind_); }
  absl::Status Step(float* params, float* grads, int64_t size, double lr) override;
  absl::StatusOr<std::string> SaveState() override;
  absl::Status RestoreState(absl::string_view state) override;
  int64_t step_count() const override { return step_; }
  // Downloads the moment (empty, logged, if the download fails).
  const std::vector<float>& first_moment() const override;

 private:
  DeviceDenseOptimizer(optim::OptimizerKind kind, const optim::OptimizerOptions& options,
                       optim::RankGroup* group, model::ModelOps* ops, int64_t size)
      : kind_(kind), options_(options), group_(group), ops_(ops), size_(size) {}
  bool has_v() const { return kind_ == optim::OptimizerKind::kAdamW; }
  absl::Status UploadFloats(device::DeviceBuffer& buffer, const std::vector<float>& values);

  optim::OptimizerKind kind_;
  optim::OptimizerOptions options_;
  optim::RankGroup* group_;
  model::ModelOps* ops_;
  int64_t size_;
  int64_t step_ = 0;
  device::DeviceBuffer m_, v_, decays_;
  mutable std::vector<float> first_moment_download_;
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_DEVICE_DENSE_OPTIMIZER_H_
