#include "runtime/train/device_topk_adamw.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/optim/optim_scalars.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::train {

absl::StatusOr<std::unique_ptr<DeviceTopKAdamW>> DeviceTopKAdamW::Create(
    const optim::OptimizerOptions& options, optim::RankGroup* group, model::ModelOps* ops,
    optim::DecayMask decay_mask) {
  auto traits = optim::FindOptimizer(options.name);
  if (!traits.ok()) return traits.status();
  if ((*traits)->kind != optim::OptimizerKind::kTopKAdamW) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer '", options.name, "' is not topk-adamw"));
  }
  CORESCAPE_RETURN_IF_ERROR(optim::ValidateTopKAdamWOptions(options));
  const int64_t size = static_cast<int64_t>(decay_mask.size());
  std::unique_ptr<DeviceTopKAdamW> optimizer(new DeviceTopKAdamW(options, group, ops, size));
  const size_t float_bytes = static_cast<size_t>(size) * sizeof(float);
  for (device::DeviceBuffer* buffer : {&optimizer->m_, &optimizer->v_, &optimizer->residual_}) {
    auto zeroed = model::AllocateZeroed(*ops, float_bytes);
    if (!zeroed.ok()) return zeroed.status();
    *buffer = *std::move(zeroed);
  }
  auto decays = model::AllocateCopy(*ops, decay_mask.data(), decay_mask.size());
  if (!decays.ok()) return decays.status();
  optimizer->decays_ = *std::move(decays);
  return optimizer;
}

absl::Status DeviceTopKAdamW::Step(float* params, float* grads, int64_t size, double lr) {
  if (size != size_) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": buffer of ", size,
                                                   " entries, optimizer built for ", size_));
  }
  const int64_t sent = group_->bytes_sent(), received = group_->bytes_received();
  const double density = options_.scape.density_schedule.At(step_, options_.scape.density);
  last_step_ = {};
  CORESCAPE_RETURN_IF_ERROR(ops_->AddInto(residual_.as<float>(), grads, size_));
  if (optim::DenseBySchedule(step_, options_.scape.dense_warmup_steps, options_.scape.density,
                             options_.scape.density_schedule)) {
    CORESCAPE_RETURN_IF_ERROR(DenseStep(params, lr));
  } else {
    CORESCAPE_RETURN_IF_ERROR(
        SparseStep(params, grads, optim::MaskCountForRange(size_, density), lr));
  }
  ++step_;
  last_step_.step = step_;
  last_step_.bytes_sent = group_->bytes_sent() - sent;
  last_step_.bytes_received = group_->bytes_received() - received;
  return absl::OkStatus();
}

absl::Status DeviceTopKAdamW::DenseStep(float* params, double lr) {
  const absl::Time start = absl::Now();
  // The collective reads what the backend's stream wrote.
  CORESCAPE_RETURN_IF_ERROR(ops_->Synchronize());
  CORESCAPE_RETURN_IF_ERROR(
      group_->AllReduceSumIn(residual_.as<float>(), size_, ops_->host_addressable()));
  const absl::Time reduced = absl::Now();
  CORESCAPE_RETURN_IF_ERROR(Update(params, residual_.as<float>(), lr));
  CORESCAPE_RETURN_IF_ERROR(ops_->Zero(residual_.data(), static_cast<size_t>(size_) * sizeof(float)));
  last_step_.dense = true;
  last_step_.synced_values = size_;
  last_step_.phases.all_reduce_wait = absl::ToDoubleSeconds(reduced - start);
  last_step_.phases.update = absl::ToDoubleSeconds(absl::Now() - reduced);
  return absl::OkStatus();
}

absl::Status DeviceTopKAdamW::SparseStep(float* params, float* grads, int64_t k, double lr) {
  absl::Time mark = absl::Now();
  auto lap = [&mark](double& phase) {
    const absl::Time now = absl::Now();
    phase += absl::ToDoubleSeconds(now - mark);
    mark = now;
  };
  CORESCAPE_RETURN_IF_ERROR(
      model::EnsureCapacity(*ops_, picked_, static_cast<size_t>(k) * sizeof(int64_t)));
  CORESCAPE_RETURN_IF_ERROR(
      model::EnsureCapacity(*ops_, picked_values_, static_cast<size_t>(k) * sizeof(float)));
  const kernels::host_device::TopKSegment whole{0, size_, k};
  CORESCAPE_RETURN_IF_ERROR(ops_->SelectLargestMagnitudes(
      residual_.as<float>(), absl::MakeConstSpan(&whole, 1), 0, picked_.as<int64_t>()));
  lap(last_step_.phases.select);
  // What is sent leaves the residual.
  CORESCAPE_RETURN_IF_ERROR(ops_->ScapePack(picked_.as<int64_t>(), k, residual_.as<float>(),
                                            picked_values_.as<float>()));
  std::vector<int64_t> picked(k);
  std::vector<float> values(k);
  CORESCAPE_RETURN_IF_ERROR(
      ops_->Download(picked.data(), picked_.data(), picked.size() * sizeof(int64_t)));
  CORESCAPE_RETURN_IF_ERROR(
      ops_->Download(values.data(), picked_values_.data(), values.size() * sizeof(float)));
  lap(last_step_.phases.pack);
  auto sum = optim::AllGatherSparseSum(*group_, picked, values, size_, name());
  if (!sum.ok()) return sum.status();
  lap(last_step_.phases.all_reduce_wait);
  // The gradient buffer becomes the dense sum: zero off the union.
  const int64_t united = static_cast<int64_t>(sum->indices.size());
  CORESCAPE_RETURN_IF_ERROR(
      model::EnsureCapacity(*ops_, union_, static_cast<size_t>(united) * sizeof(int64_t)));
  CORESCAPE_RETURN_IF_ERROR(
      model::EnsureCapacity(*ops_, union_values_, static_cast<size_t>(united) * sizeof(float)));
  CORESCAPE_RETURN_IF_ERROR(
      ops_->Upload(union_.data(), sum->indices.data(), sum->indices.size() * sizeof(int64_t)));
  CORESCAPE_RETURN_IF_ERROR(ops_->Upload(union_values_.data(), sum->values.data(),
                                         sum->values.size() * sizeof(float)));
  CORESCAPE_RETURN_IF_ERROR(ops_->Zero(grads, static_cast<size_t>(size_) * sizeof(float)));
  CORESCAPE_RETURN_IF_ERROR(ops_->UnpackAtMask(union_.as<int64_t>(), united,
                                               union_values_.as<float>(), grads));
  CORESCAPE_RETURN_IF_ERROR(Update(params, grads, lr));
  lap(last_step_.phases.update);
  last_union_size_ = united;
  last_step_.dense = false;
  last_step_.synced_values = k;
  last_step_.mask_entries = united;
  return absl::OkStatus();
}

absl::Status DeviceTopKAdamW::Update(float* params, const float* grads, double lr) {
  // No clipping: the host form applies AdamW to the exchanged sum as it is.
  return ops_->AdamWUpdate(params, m_.as<float>(), v_.as<float>(), grads, decays_.as<uint8_t>(),
                           size_, optim::AdamWScalarsAt(options_.adam, step_ + 1, lr));
}

absl::StatusOr<std::string> DeviceTopKAdamW::SaveState() {
  optim::AdamState state;
  state.step = step_;
  state.has_v = true;
  state.has_residual = true;
  for (auto [buffer, host] : {std::pair{&m_, &state.m}, std::pair{&v_, &state.v},
                              std::pair{&residual_, &state.residual}}) {
    auto values = model::DownloadFloats(*ops_, buffer->data(), size_);
    if (!values.ok()) return values.status();
    *host = *std::move(values);
  }
  return optim::EncodeAdamState(name(), state);
}

absl::Status DeviceTopKAdamW::RestoreState(absl::string_view blob) {
  auto state = optim::DecodeAdamState(blob, name(), size_, /*has_v=*/true, /*has_residual=*/true);
  if (!state.ok()) return state.status();
  const size_t bytes = static_cast<size_t>(size_) * sizeof(float);
  CORESCAPE_RETURN_IF_ERROR(ops_->Upload(m_.data(), state->m.data(), bytes));
  CORESCAPE_RETURN_IF_ERROR(ops_->Upload(v_.data(), state->v.data(), bytes));
  CORESCAPE_RETURN_IF_ERROR(ops_->Upload(residual_.data(), state->residual.data(), bytes));
  step_ = state->step;
  return absl::OkStatus();
}

const std::vector<float>& DeviceTopKAdamW::first_moment() const {
  auto m = model::DownloadFloats(*ops_, m_.data(), size_);
  LOG_IF(ERROR, !m.ok()) << name() << ": first moment not downloaded: " << m.status();
  first_moment_download_ = m.ok() ? *std::move(m) : std::vector<float>();
  return first_moment_download_;
}

}  // namespace corescape::train
