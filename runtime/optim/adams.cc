#include "runtime/optim/adams.h"

#include "absl/strings/str_cat.h"
#include "runtime/optim/optim_scalars.h"

namespace corescape::optim {

AdamS::AdamS(AdamSConfig config, std::vector<uint8_t> decay_mask)
    : config_(config), decay_mask_(std::move(decay_mask)), m_(decay_mask_.size(), 0.0f) {}

absl::Status AdamS::Step(float* params, const float* grads, int64_t size, double lr) {
  if (size != static_cast<int64_t>(m_.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AdamS: buffer of ", size, " entries, optimizer built for ", m_.size()));
  }
  ++step_;
  AdamSElements(params, m_.data(), grads, decay_mask_.data(), size,
                AdamSScalarsAt(config_, lr));
  return absl::OkStatus();
}

void AdamSElements(float* params, float* m, const float* grads, const uint8_t* decays, int64_t n,
                   const kernels::host_device::AdamSScalars& scalars) {
  for (int64_t i = 0; i < n; ++i) {
    kernels::host_device::AdamSElement(params[i], m[i], grads[i], decays[i] != 0, scalars);
  }
}

}  // namespace corescape::optim
