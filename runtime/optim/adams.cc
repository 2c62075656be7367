#include "runtime/optim/adams.h"

#include "absl/strings/str_cat.h"

namespace corescape::optim {

AdamS::AdamS(AdamSConfig config, std::vector<uint8_t> decay_mask)
    : config_(config), decay_mask_(std::move(decay_mask)), m_(decay_mask_.size(), 0.0f) {}

absl::Status AdamS::Step(float* params, const float* grads, int64_t size, double lr) {
  if (size != static_cast<int64_t>(m_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AdamS: buffer of ", size, " entries, optimizer built for ", m_.size()));
  }
  ++step_;
  const float b1 = static_cast<float>(config_.beta1), b2 = static_cast<float>(config_.beta2);
  const float eps = static_cast<float>(config_.epsilon), flr = static_cast<float>(lr);
  const float decay = static_cast<float>(1.0 - lr * config_.weight_decay);
  for (int64_t i = 0; i < size; ++i) {
    AdamSUpdate(params[i], m_[i], grads[i], b1, b2, eps, flr, decay_mask_[i] ? decay : 1.0f);
  }
  return absl::OkStatus();
}

}  // namespace corescape::optim
