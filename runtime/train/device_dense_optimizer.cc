#include "runtime/train/device_dense_optimizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/optim/optim_scalars.h"

namespace corescape::train {

bool DeviceDenseOptimizer::Supports(optim::OptimizerKind kind) {
  return kind == optim::OptimizerKind::kAdamW || kind == optim::OptimizerKind::kAdamS;
}

absl::StatusOr<std::unique_ptr<DeviceDenseOptimizer>> DeviceDenseOptimizer::Create(
    const optim::OptimizerOptions& options, optim::RankGroup* group, model::ModelOps* ops,
    optim::DecayMask decay_mask) {
  auto traits = optim::FindOptimizer(options.name);
  if (!traits.ok()) return traits.status();
  if (!Supports((*traits)->kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer '", options.name, "' has no form whose state lives on the device"));
  }
  const int64_t size = static_cast<int64_t>(decay_mask.size());
  std::unique_ptr<DeviceDenseOptimizer> optimizer(
      new DeviceDenseOptimizer((*traits)->kind, options, group, ops, size));
  const size_t float_bytes = static_cast<size_t>(size) * sizeof(float);
  auto m = model::AllocateZeroed(*ops, float_bytes);
  if (!m.ok()) return m.status();
  optimizer->m_ = *std::move(m);
  if (optimizer->has_v()) {
    auto v = model::AllocateZeroed(*ops, float_bytes);
    if (!v.ok()) return v.status();
    optimizer->v_ = *std::move(v);
  }
  auto decays = model::AllocateCopy(*ops, decay_mask.data(), decay_mask.size());
  if (!decays.ok()) return decays.status();
  optimizer->decays_ = *std::move(decays);
  return optimizer;
}

absl::Status DeviceDenseOptimizer::Step(float* params, float* grads, int64_t size, double lr) {
  if (size != size_) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": buffer of ", size,
                                                   " entries, optimizer built for ", size_));
  }
  const int64_t sent = group_->bytes_sent(), received = group_->bytes_received();
  const absl::Time start = absl::Now();
  // The collective reads what the backend's stream wrote.
  CORESCAPE_RETURN_IF_ERROR(ops_->Synchronize());
  CORESCAPE_RETURN_IF_ERROR(group_->AllReduceSumIn(grads, size, ops_->host_addressable()));
  const absl::Time reduced = absl::Now();
  double grad_norm = 0;
  if (kind_ == optim::OptimizerKind::kAdamW) {
    auto norm = ops_->ClipByGlobalNorm(grads, size, options_.grad_clip);
    if (!norm.ok()) return norm.status();
    grad_norm = *norm;
    CORESCAPE_RETURN_IF_ERROR(
        ops_->AdamWUpdate(params, m_.as<float>(), v_.as<float>(), grads, decays_.as<uint8_t>(),
                          size, optim::AdamWScalarsAt(options_.adam, step_ + 1, lr)));
  } else {
    CORESCAPE_RETURN_IF_ERROR(ops_->AdamSUpdate(params, m_.as<float>(), grads,
                                                decays_.as<uint8_t>(), size,
                                                optim::AdamSScalarsAt(options_.adam, lr)));
  }
  ++step_;
  last_step_ = {};
  last_step_.step = step_;
  last_step_.synced_values = size;
  last_step_.grad_norm = grad_norm;
  last_step_.phases.all_reduce_wait = absl::ToDoubleSeconds(reduced - start);
  // Enqueued, not finished: the update overlaps whatever the host does next.
  last_step_.phases.update = absl::ToDoubleSeconds(absl::Now() - reduced);
  last_step_.bytes_sent = group_->bytes_sent() - sent;
  last_step_.bytes_received = group_->bytes_received() - received;
  return absl::OkStatus();
}

absl::Status DeviceDenseOptimizer::UploadFloats(device::DeviceBuffer& buffer,
                                                const std::vector<float>& values) {
  return ops_->Upload(buffer.data(), values.data(), values.size() * sizeof(float));
}

absl::StatusOr<std::string> DeviceDenseOptimizer::SaveState() {
  optim::AdamState state;
  state.step = step_;
  auto m = model::DownloadFloats(*ops_, m_.data(), size_);
  if (!m.ok()) return m.status();
  state.m = *std::move(m);
  if (has_v()) {
    auto v = model::DownloadFloats(*ops_, v_.data(), size_);
    if (!v.ok()) return v.status();
    state.has_v = true;
    state.v = *std::move(v);
  }
  return optim::EncodeAdamState(name(), state);
}

absl::Status DeviceDenseOptimizer::RestoreState(absl::string_view blob) {
  auto state = optim::DecodeAdamState(blob, name(), size_, has_v(), /*has_residual=*/false);
  if (!state.ok()) return state.status();
  CORESCAPE_RETURN_IF_ERROR(UploadFloats(m_, state->m));
  if (has_v()) CORESCAPE_RETURN_IF_ERROR(UploadFloats(v_, state->v));
  step_ = state->step;
  return absl::OkStatus();
}

const std::vector<float>& DeviceDenseOptimizer::first_moment() const {
  auto m = model::DownloadFloats(*ops_, m_.data(), size_);
  LOG_IF(ERROR, !m.ok()) << name() << ": first moment not downloaded: " << m.status();
  first_moment_download_ = m.ok() ? *std::move(m) : std::vector<float>();
  return first_moment_download_;
}

}  // namespace corescape::train
