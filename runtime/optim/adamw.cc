#include "runtime/optim/adamw.h"

#include <cmath>

#include "absl/strings/str_cat.h"

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
  const double b1 = config_.beta1, b2 = config_.beta2;
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(step_));
  const double bias2_sqrt = std::sqrt(1.0 - std::pow(b2, static_cast<double>(step_)));
  const float step_size = static_cast<float>(lr / bias1);
  const float decay = static_cast<float>(1.0 - lr * config_.weight_decay);
  const float eps = static_cast<float>(config_.epsilon);
  const float inv_bias2_sqrt = static_cast<float>(1.0 / bias2_sqrt);
  const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
  for (int64_t i = 0; i < size; ++i) {
    const float g = grads[i];
    if (decay_mask_[i]) params[i] *= decay;
    m_[i] = fb1 * m_[i] + (1.0f - fb1) * g;
    v_[i] = fb2 * v_[i] + (1.0f - fb2) * g * g;
    const float denominator = std::sqrt(v_[i]) * inv_bias2_sqrt + eps;
    params[i] -= step_size * m_[i] / denominator;
  }
  return absl::OkStatus();
}

double ClipGradientNorm(float* grads, int64_t size, double max_norm) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < size; ++i) sum_squares += double{grads[i]} * grads[i];
  const double norm = std::sqrt(sum_squares);
  if (max_norm > 0.0 && norm > max_norm) {
    const float scale = static_cast<float>(max_norm / (norm + 1e-6));
    for (int64_t i = 0; i < size; ++i) grads[i] *= scale;
  }
  return norm;
}

}  // namespace corescape::optim
