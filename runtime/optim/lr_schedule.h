#ifndef CORESCAPE_RUNTIME_OPTIM_LR_SCHEDULE_H_
#define CORESCAPE_RUNTIME_OPTIM_LR_SCHEDULE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace corescape::optim {

// Learning rate at a (0-based) step: linear warm-up to peak over
// warmup_steps, then constant, linear or cosine decay to min_lr at
// total_steps.
struct LrSchedule {
  enum class Kind { kConstant, kLinear, kCosine };
  Kind kind = Kind::kCosine;
  double peak_lr = 1e-3;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  double At(int64_t step) const;
  static const char* KindName(Kind kind);  // as ParseKind reads it
  static absl::StatusOr<Kind> ParseKind(const std::string& name);
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_LR_SCHEDULE_H_
