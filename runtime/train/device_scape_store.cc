#include "runtime/train/device_scape_store.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/optim/optimizer_names.h"

namespace corescape::train {
namespace {

absl::Status CheckSize(const std::vector<float>& values, int64_t size, const char* what) {
  if (static_cast<int64_t>(values.size()) != size) {
    return absl::InvalidArgumentError(absl::StrCat("scape device state: ", what, " of ",
                                                   values.size(), " entries, not ", size));
  }
  return absl::OkStatus();
}

}  // namespace

bool DeviceScapeStore::Supports(const optim::OptimizerOptions& options) {
  auto traits = optim::FindOptimizer(options.name);
  if (!traits.ok()) return false;
  const optim::OptimizerKind kind = (*traits)->kind;
  return (kind == optim::OptimizerKind::kScape || kind == optim::OptimizerKind::kScapeGlobal) &&
         options.scape.rule == optim::ScapeRule::kReference;
}

absl::StatusOr<std::unique_ptr<DeviceScapeStore>> DeviceScapeStore::Create(
    model::ModelOps* ops, const optim::DecayMask& decay_mask) {
  const int64_t size = static_cast<int64_t>(decay_mask.size());
  std::unique_ptr<DeviceScapeStore> store(new DeviceScapeStore(ops, size));
  const size_t float_bytes = static_cast<size_t>(size) * sizeof(float);
  for (device::DeviceBuffer* buffer : {&store->m_, &store->residual_, &store->values_}) {
    auto zeroed = model::AllocateZeroed(*ops, float_bytes);
    if (!zeroed.ok()) return zeroed.status();
    *buffer = *std::move(zeroed);
  }
  auto decays = model::AllocateCopy(*ops, decay_mask.data(), decay_mask.size());
  if (!decays.ok()) return decays.status();
  store->decays_ = *std::move(decays);
  return store;
}

absl::Status DeviceScapeStore::Payload(const float* grads,
                                       const kernels::cuda::ScapeReferenceScalars& scalars,
                                       int64_t begin, int64_t end, std::vector<float>& statistic) {
  if (begin < 0 || end < begin || end > size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("scape device state: range [", begin, ", ", end, ") of ", size_));
  }
  CORESCAPE_RETURN_IF_ERROR(
      ops_->ScapePayload(residual_.as<float>(), m_.as<float>(), grads, size_, scalars));
  statistic.resize(end - begin);
  CORESCAPE_RETURN_IF_ERROR(ops_->Download(statistic.data(), residual_.as<float>() + begin,
                                           statistic.size() * sizeof(float)));
  for (float& x : statistic) x = std::fabs(x);
  return absl::OkStatus();
}

absl::StatusOr<float*> DeviceScapeStore::Pack(const std::vector<int64_t>& mask, bool dense) {
  dense_ = dense;
  count_ = dense ? size_ : static_cast<int64_t>(mask.size());
  if (count_ > size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("scape device state: a mask of ", count_, " entries for ", size_));
  }
  const int64_t* device_mask = nullptr;
  if (!dense) {
    const size_t bytes = mask.size() * sizeof(int64_t);
    if (mask_.size() < bytes) {
      // The stream may still read the old indices (the cache hands them out again).
      CORESCAPE_RETURN_IF_ERROR(ops_->Synchronize());
      mask_.Reset();
      auto grown = ops_->Allocate(bytes);
      if (!grown.ok()) return grown.status();
      mask_ = *std::move(grown);
    }
    CORESCAPE_RETURN_IF_ERROR(ops_->Upload(mask_.data(), mask.data(), bytes));
    device_mask = mask_.as<int64_t>();
  }
  CORESCAPE_RETURN_IF_ERROR(
      ops_->ScapePack(device_mask, count_, residual_.as<float>(), values_.as<float>()));
  // The all-reduce reads the values outside the backend's stream.
  CORESCAPE_RETURN_IF_ERROR(ops_->Synchronize());
  return values_.as<float>();
}

absl::StatusOr<double> DeviceScapeStore::Apply(float* params,
                                               const kernels::cuda::ScapeReferenceScalars& scalars,
                                               double grad_clip) {
  const int64_t* device_mask = dense_ ? nullptr : mask_.as<int64_t>();
  CORESCAPE_RETURN_IF_ERROR(
      ops_->ScapeReconstruct(values_.as<float>(), device_mask, count_, m_.as<float>(), scalars));
  auto norm = ops_->ClipByGlobalNorm(values_.as<float>(), count_, grad_clip);
  if (!norm.ok()) return norm.status();
  CORESCAPE_RETURN_IF_ERROR(ops_->ScapeReferenceApply(params, m_.as<float>(), values_.as<float>(),
                                                      device_mask, count_,
                                                      decays_.as<uint8_t>(), size_, scalars));
  return *norm;
}

absl::StatusOr<float*> DeviceScapeStore::Residual() {
  CORESCAPE_RETURN_IF_ERROR(ops_->Synchronize());
  return residual_.as<float>();
}

absl::Status DeviceScapeStore::ScaleResidual(float scale) {
  return ops_->Scale(residual_.as<float>(), size_, scale);
}

absl::Status DeviceScapeStore::Read(std::vector<float>& m, std::vector<float>& e) {
  m.resize(size_);
  e.resize(size_);
  const size_t bytes = static_cast<size_t>(size_) * sizeof(float);
  CORESCAPE_RETURN_IF_ERROR(ops_->Download(m.data(), m_.data(), bytes));
  return ops_->Download(e.data(), residual_.data(), bytes);
}

absl::Status DeviceScapeStore::Write(const std::vector<float>& m, const std::vector<float>& e) {
  CORESCAPE_RETURN_IF_ERROR(CheckSize(m, size_, "first moment"));
  CORESCAPE_RETURN_IF_ERROR(CheckSize(e, size_, "residual"));
  const size_t bytes = static_cast<size_t>(size_) * sizeof(float);
  CORESCAPE_RETURN_IF_ERROR(ops_->Upload(m_.data(), m.data(), bytes));
  return ops_->Upload(residual_.data(), e.data(), bytes);
}

}  // namespace corescape::train
