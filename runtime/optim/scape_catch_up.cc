#include "runtime/optim/scape_catch_up.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/optim/mask_walk.h"

namespace corescape::optim {

CatchUpRule::CatchUpRule(const ScapeConfig& config)
    : adams_(config.adams),
      normalizer_beta_(config.normalizer_beta),
      powers_(CatchUpPowerTablesOf(config.adams.beta1, config.catch_up_exponent,
                                   kCatchUpCachedWindows)) {}

CatchUpRule::Scalars CatchUpRule::ScalarsAt(int64_t step, double lr) const {
  return ScapeCatchUpScalarsAt(adams_, lr, normalizer_beta_, step == 0);
}

absl::Status CatchUpRule::Windows(int64_t step, const std::vector<int64_t>* mask,
                                  const std::vector<int64_t>& last_sync,
                                  std::vector<int32_t>& windows) {
  const size_t count = mask != nullptr ? mask->size() : last_sync.size();
  windows.resize(count);
  for (size_t p = 0; p < count; ++p) {
    const int64_t window = step - last_sync[mask != nullptr ? (*mask)[p] : p];
    if (window > std::numeric_limits<int32_t>::max()) {
      return absl::OutOfRangeError(absl::StrCat("scape: a window of ", window, " steps"));
    }
    windows[p] = static_cast<int32_t>(window);
  }
  return absl::OkStatus();
}

void CatchUpRule::Accumulate(absl::Span<float> residual, const float* grads, const Scalars& s,
                             ThreadPool* pool) {
  float* e = residual.data();
  ParallelForOn(
      pool, static_cast<int64_t>(residual.size()),
      [&](int64_t from, int64_t to) {
        for (int64_t j = from; j < to; ++j) kernels::host_device::ScapeAccumulateElement(e[j], grads[j], s);
      },
      kUpdateChunk);
}

void CatchUpRule::Apply(float* params, absl::Span<float> m, absl::Span<float> vbar,
                        const float* values, const std::vector<int64_t>& mask, bool dense,
                        absl::Span<const int32_t> windows, const uint8_t* decays,
                        const Scalars& s, const CatchUpPowerTables& powers, ThreadPool* pool) {
  const kernels::host_device::CatchUpPowers tables = powers.OnHost();
  WalkMaskOn(
      pool, static_cast<int64_t>(m.size()), mask, dense,
      [&](int64_t j, int64_t p) {
        const int64_t k = windows[p];
        params[j] *= decays[j] ? s.decay : 1.0f;
        kernels::host_device::ScapeCatchUpOnMask(params[j], m[j], vbar[j], values[p], k,
                                          kernels::host_device::CatchUpBeta1Power(k, tables),
                                          kernels::host_device::CatchUpSteps(k, tables), s);
      },
      [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) params[j] *= decays[j] ? s.decay : 1.0f;
      });
}

}  // namespace corescape::optim
