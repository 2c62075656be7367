#ifndef CORESCAPE_RUNTIME_TRAIN_DEVICE_SCAPE_STORE_H_
#define CORESCAPE_RUNTIME_TRAIN_DEVICE_SCAPE_STORE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::train {

// SCAPE's reference-rule state (the first moment and this rank's residual)
// in a model backend's memory beside the parameters, its per-coordinate
// work run by the backend's kernels (ModelOps::Scape*). The optimizer keeps
// the masks on the host: per step the rank's statistic range comes down
// (|e| over its partition range, N/P floats) for the next mask's top-k, and
// the mask's indices go up; the values all-reduce and everything else stays
// on the device.
class DeviceScapeStore final : public optim::ScapeReferenceStore {
 public:
  // Whether `options` names SCAPE with the reference rule, whose state this
  // store can hold.
  static bool Supports(const optim::OptimizerOptions& options);

  // For a buffer of decay_mask.size() coordinates; the backend's errors (out
  // of memory) for the state.
  static absl::StatusOr<std::unique_ptr<DeviceScapeStore>> Create(model::ModelOps* ops,
                                                                  const optim::DecayMask& decay_mask);

  bool host_addressable() const override { return ops_->host_addressable(); }
  absl::Status Payload(const float* grads, const kernels::cuda::ScapeReferenceScalars& scalars,
                       int64_t begin, int64_t end, std::vector<float>& statistic) override;
  absl::StatusOr<float*> Pack(const std::vector<int64_t>& mask, bool dense) override;
  absl::StatusOr<double> Apply(float* params, const kernels::cuda::ScapeReferenceScalars& scalars,
                               double grad_clip) override;
  absl::StatusOr<float*> Residual() override;
  absl::Status ScaleResidual(float scale) override;
  absl::Status Read(std::vector<float>& m, std::vector<float>& e) override;
  absl::Status Write(const std::vector<float>& m, const std::vector<float>& e) override;

 private:
  DeviceScapeStore(model::ModelOps* ops, int64_t size) : ops_(ops), size_(size) {}

  model::ModelOps* ops_;
  int64_t size_;
  device::DeviceBuffer m_, residual_, values_, decays_, mask_;
  // The last Pack's mask: `count` indices in mask_, or every coordinate.
  int64_t count_ = 0;
  bool dense_ = true;
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_DEVICE_SCAPE_STORE_H_
