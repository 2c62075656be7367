#ifndef CORESCAPE_RUNTIME_OPTIM_SCAPE_CATCH_UP_H_
#define CORESCAPE_RUNTIME_OPTIM_SCAPE_CATCH_UP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/optim/optim_scalars.h"
#include "runtime/optim/scape_config.h"

namespace corescape::optim {

// SCAPE's catch-up rule (ScapeRule::kCatchUp, the default; docs/scape.md).
// Each rank accumulates its unsent increments, e^r ← e^r + (1−β1)·g^r; the
// values at the mask are summed over ranks, b = Σ_r e^r_j, and e^r_j ← 0.
// A coordinate j last synchronized K steps ago then catches up:
//   ĝ = b/((1−β1)·K),  v = β2·m² + (1−β2)·ĝ²,  v̄ ← ρ·v̄ + (1−ρ)·v,
//   m ← β1^K·m + (1−β1^K)·ĝ,  θ ← θ·(1−ηλ) − η·K^α·m/(√v + ε)
// (K = 1 is AdamS exactly); off the mask θ only decays.
//
// Host form: Accumulate and Apply below, over host memory. Device form:
// ModelOps::ScapeAccumulate and ScapeCatchUpApply (runtime/model), launches
// of the same per-coordinate bodies (kernels/cuda/optim_updates.h:
// ScapeAccumulateElement, ScapeCatchUpOnMask), bit for bit.
class CatchUpRule {
 public:
  using Scalars = kernels::host_device::ScapeCatchUpScalars;

  explicit CatchUpRule(const ScapeConfig& config);

  // The scalars of step `step` (from 0) at learning rate `lr`.
  Scalars ScalarsAt(int64_t step, double lr) const;
  // β1^K and K^α of the windows the tables hold (longer ones are computed
  // by the bodies, to the same values).
  const CatchUpPowerTables& powers() const { return powers_; }

  // The windows K = step − last_sync[j] ≥ 1 of the coordinates j of `mask`
  // (null: every coordinate of last_sync, in order) into `windows`;
  // OUT_OF_RANGE for one past int32.
  static absl::Status Windows(int64_t step, const std::vector<int64_t>* mask,
                              const std::vector<int64_t>& last_sync,
                              std::vector<int32_t>& windows);

  // Host form: e ← e + (1−β1)·g over every coordinate.
  static void Accumulate(absl::Span<float> residual, const float* grads, const Scalars& s,
                         ThreadPool* pool);
  // Host form of the update from the summed values at `mask` (ascending;
  // `dense`: every coordinate, values[j] = j's): the mask's p-th coordinate
  // covered windows[p] ≥ 1 steps. decays[j] != 0 where θ_j decays.
  static void Apply(float* params, absl::Span<float> m, absl::Span<float> vbar,
                    const float* values, const std::vector<int64_t>& mask, bool dense,
                    absl::Span<const int32_t> windows, const uint8_t* decays, const Scalars& s,
                    const CatchUpPowerTables& powers, ThreadPool* pool);

 private:
  AdamConfig adams_;
  double normalizer_beta_;
  CatchUpPowerTables powers_;
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_SCAPE_CATCH_UP_H_
