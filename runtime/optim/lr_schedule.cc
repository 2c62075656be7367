#include "runtime/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace corescape::optim {

double LrSchedule::At(int64_t step) const {
  if (step < warmup_steps) {
    return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  if (kind == Kind::kConstant) return peak_lr;
  const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  const double progress = std::clamp((step - warmup_steps) / span, 0.0, 1.0);
  if (kind == Kind::kLinear) return min_lr + (peak_lr - min_lr) * (1.0 - progress);
  return min_lr + 0.5 * (peak_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

const char* LrSchedule::KindName(Kind kind) {
  switch (kind) {
    case Kind::kConstant: return "constant";
    case Kind::kLinear: return "linear";
    case Kind::kCosine: return "cosine";
  }
  return "?";
}

absl::StatusOr<LrSchedule::Kind> LrSchedule::ParseKind(const std::string& name) {
  for (Kind kind : {Kind::kConstant, Kind::kLinear, Kind::kCosine}) {
    if (name == KindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "optimizer.schedule: unknown schedule '", name, "' (constant, linear, cosine)"));
}

}  // namespace corescape::optim
