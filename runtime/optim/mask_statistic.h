#ifndef CORESCAPE_RUNTIME_OPTIM_MASK_STATISTIC_H_
#define CORESCAPE_RUNTIME_OPTIM_MASK_STATISTIC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/cuda/optim_updates.h"

namespace corescape::optim {

// The first-moment statistic rank r ranks its range by (defined beside its
// per-coordinate body, which the host and the device both run).
using MaskStatistic = kernels::host_device::MaskStatistic;

// The statistics' names in job specs and flags ("momentum-plus-scaled-residual",
// "momentum-plus-residual", "residual", "momentum", "normalized-residual").
const char* MaskStatisticName(MaskStatistic statistic);
absl::StatusOr<MaskStatistic> ParseMaskStatistic(absl::string_view name);

// Entries per chunk of a statistic pass on a thread pool.
inline constexpr int64_t kMaskStatisticChunk = 1 << 16;

// `statistic` of each of n coordinates into out (the per-coordinate body
// the device runs too): m is read unless the statistic is kResidual or
// kNormalizedResidual, vbar only by kNormalizedResidual (either may be null
// where it is not read). With a pool, in chunks on its threads (the same
// values).
void FillMaskStatistic(MaskStatistic statistic, const float* m, const float* e, const float* vbar,
                       int64_t n, const kernels::host_device::MaskStatisticScalars& scalars, float* out,
                       ThreadPool* pool = nullptr);
// The same at the given coordinates: out[i] is coordinates[i]'s.
void FillMaskStatisticAt(MaskStatistic statistic, const float* m, const float* e,
                         const float* vbar, absl::Span<const int64_t> coordinates,
                         const kernels::host_device::MaskStatisticScalars& scalars, float* out,
                         ThreadPool* pool = nullptr);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_MASK_STATISTIC_H_
