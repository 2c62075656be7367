#include "runtime/optim/adamw.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/optim/optim_scalars.h"

namespace corescape::optim {

AdamW::AdamW(AdamWConfig config, std::vector<uint8_t> decay_mask)
    : config_(config),
      decay_mask_(std::move(decay_mask)),
      m_(decay_mask_.size(), 0.0f),
      v_(decay_mask_.size(), 0.0f) {}

absl::Status AdamW::Step(float* params, const float* grads, int64_t size, double lr) {
  if (size != static_cast<int64_t>(m_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AdamW: buffer of ", size, " entries, optimizer built for ", m_.size()));
  }
  ++step_;
  AdamWElements(params, m_.data(), v_.data(), grads, decay_mask_.data(), size,
                AdamWScalarsAt(config_, step_, lr));
  return absl::OkStatus();
}

void AdamWElements(float* params, float* m, float* v, const float* grads, const uint8_t* decays,
                   int64_t n, const kernels::host_device::AdamWScalars& scalars) {
  for (int64_t i = 0; i < n; ++i) {
    kernels::host_device::AdamWElement(params[i], m[i], v[i], grads[i], decays[i] != 0, scalars);
  }
}

double ClipGradientNorm(float* grads, int64_t size, double max_norm) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < size; ++i) sum_squares += double{grads[i]} * grads[i];
  const double norm = std::sqrt(sum_squares);
  const float scale = kernels::host_device::ClipScale(norm, max_norm);
  if (scale != 1.0f) {
    for (int64_t i = 0; i < size; ++i) grads[i] *= scale;
  }
  return norm;
}

}  // namespace corescape::optim
