#include "runtime/optim/scape_host_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/optim/scape_catch_up.h"
#include "runtime/optim/scape_reference.h"

namespace corescape::optim {

absl::Status HostScapeStore::Payload(const float* grads,
                                     const kernels::host_device::ScapeReferenceScalars& s, int64_t begin,
                                     int64_t end, std::vector<float>& statistic) {
  ReferenceRule::Payload(absl::MakeSpan(residual_), m_.data(), grads, s, pool_);
  statistic.resize(end - begin);
  // |e|: the residual statistic, which reads no scalars.
  FillMaskStatistic(MaskStatistic::kResidual, nullptr, residual_.data() + begin, nullptr,
                    end - begin, {}, statistic.data(), pool_);
  return absl::OkStatus();
}

absl::StatusOr<float*> HostScapeStore::Pack(const std::vector<int64_t>& mask, bool dense,
                                            MaskSource source) {
  if (source == MaskSource::kHeld) {
    return absl::FailedPreconditionError("scape: the host store holds no masks");
  }
  mask_ = &mask;
  dense_ = dense;
  received_ = source == MaskSource::kReceived;
  const int64_t synced =
      dense ? static_cast<int64_t>(residual_.size()) : static_cast<int64_t>(mask.size());
  values_.resize(synced);
  if (dense) {
    std::copy(residual_.begin(), residual_.end(), values_.begin());
    std::fill(residual_.begin(), residual_.end(), 0.0f);
  } else {
    for (int64_t p = 0; p < synced; ++p) {
      kernels::host_device::PackAtMaskElement(p, mask.data(), residual_.data(), values_.data());
    }
  }
  return values_.data();
}

absl::StatusOr<double> HostScapeStore::Apply(float* params, int64_t step,
                                             const kernels::host_device::ScapeReferenceScalars& s,
                                             double grad_clip) {
  const double norm = ReferenceRule::Apply(params, absl::MakeSpan(m_), absl::MakeSpan(values_),
                                           *mask_, dense_, decay_mask_.data(), s, grad_clip, pool_);
  ages_.Owe(step, dense_ ? nullptr : mask_);
  return norm;
}

absl::Status HostScapeStore::Accumulate(const float* grads,
                                        const kernels::host_device::ScapeCatchUpScalars& scalars) {
  CatchUpRule::Accumulate(absl::MakeSpan(residual_), grads, scalars, pool_);
  return absl::OkStatus();
}

absl::Status HostScapeStore::CatchUpApply(float* params, int64_t step,
                                          const kernels::host_device::ScapeCatchUpScalars& scalars,
                                          const CatchUpPowerTables& powers) {
  if (absl::Status s = ages_.UpdateWindows(step, dense_ ? nullptr : mask_, received_, windows_);
      !s.ok()) {
    return s;
  }
  CatchUpRule::Apply(params, absl::MakeSpan(m_), absl::MakeSpan(vbar_), values_.data(), *mask_,
                     dense_, windows_, decay_mask_.data(), scalars, powers, pool_);
  return absl::OkStatus();
}

absl::Status HostScapeStore::ScaleResidual(float scale) {
  for (float& e : residual_) e *= scale;
  return absl::OkStatus();
}

}  // namespace corescape::optim
