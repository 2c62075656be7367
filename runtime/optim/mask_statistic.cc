#include "runtime/optim/mask_statistic.h"

#include <type_traits>

#include "absl/strings/str_cat.h"

namespace corescape::optim {

const char* MaskStatisticName(MaskStatistic statistic) {
  switch (statistic) {
    case MaskStatistic::kMomentumPlusResidual: return "momentum-plus-residual";
    case MaskStatistic::kResidual: return "residual";
    case MaskStatistic::kMomentum: return "momentum";
    case MaskStatistic::kNormalizedResidual: return "normalized-residual";
    case MaskStatistic::kMomentumPlusScaledResidual: return "momentum-plus-scaled-residual";
  }
  return "?";
}

absl::StatusOr<MaskStatistic> ParseMaskStatistic(absl::string_view name) {
  for (MaskStatistic statistic :
       {MaskStatistic::kMomentumPlusScaledResidual, MaskStatistic::kMomentumPlusResidual,
        MaskStatistic::kResidual, MaskStatistic::kMomentum, MaskStatistic::kNormalizedResidual}) {
    if (name == MaskStatisticName(statistic)) return statistic;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown mask statistic '", name,
      "' (momentum-plus-scaled-residual, momentum-plus-residual, residual, momentum, "
      "normalized-residual)"));
}

namespace {

// out[i] = the statistic of coordinate coordinate(i), for i in [begin, end),
// on this thread.
template <typename Coordinate>
void FillMaskStatisticRange(MaskStatistic statistic, const float* m, const float* e,
                            const float* vbar, int64_t begin, int64_t end,
                            const kernels::host_device::MaskStatisticScalars& scalars, float* out,
                            Coordinate coordinate) {
  // One loop per statistic (a constant in each), so each vectorizes and
  // reads only what its statistic needs.
  auto fill = [&](auto constant) {
    constexpr MaskStatistic kStatistic = decltype(constant)::value;
    constexpr bool kReadsM =
        kStatistic != MaskStatistic::kResidual && kStatistic != MaskStatistic::kNormalizedResidual;
    constexpr bool kReadsV = kStatistic == MaskStatistic::kNormalizedResidual;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t j = coordinate(i);
      out[i] = kernels::host_device::MaskStatisticElement(kStatistic, kReadsM ? m[j] : 0.0f, e[j],
                                                   kReadsV ? vbar[j] : 0.0f, scalars);
    }
  };
  using S = MaskStatistic;
  switch (statistic) {
    case S::kMomentumPlusResidual: fill(std::integral_constant<S, S::kMomentumPlusResidual>()); break;
    case S::kResidual: fill(std::integral_constant<S, S::kResidual>()); break;
    case S::kMomentum: fill(std::integral_constant<S, S::kMomentum>()); break;
    case S::kNormalizedResidual: fill(std::integral_constant<S, S::kNormalizedResidual>()); break;
    case S::kMomentumPlusScaledResidual:
      fill(std::integral_constant<S, S::kMomentumPlusScaledResidual>());
      break;
  }
}

// FillMaskStatisticRange over [0, n), in chunks on the pool's threads where
// there is one and n is worth it (the same values).
template <typename Coordinate>
void FillMaskStatisticOn(ThreadPool* pool, MaskStatistic statistic, const float* m,
                         const float* e, const float* vbar, int64_t n,
                         const kernels::host_device::MaskStatisticScalars& scalars, float* out,
                         Coordinate coordinate) {
  ParallelForOn(
      n <= kMaskStatisticChunk ? nullptr : pool, n,
      [&](int64_t begin, int64_t end) {
        FillMaskStatisticRange(statistic, m, e, vbar, begin, end, scalars, out, coordinate);
      },
      kMaskStatisticChunk);
}

}  // namespace

void FillMaskStatistic(MaskStatistic statistic, const float* m, const float* e, const float* vbar,
                       int64_t n, const kernels::host_device::MaskStatisticScalars& scalars, float* out,
                       ThreadPool* pool) {
  FillMaskStatisticOn(pool, statistic, m, e, vbar, n, scalars, out, [](int64_t i) { return i; });
}

void FillMaskStatisticAt(MaskStatistic statistic, const float* m, const float* e,
                         const float* vbar, absl::Span<const int64_t> coordinates,
                         const kernels::host_device::MaskStatisticScalars& scalars, float* out,
                         ThreadPool* pool) {
  const int64_t* at = coordinates.data();
  FillMaskStatisticOn(pool, statistic, m, e, vbar, static_cast<int64_t>(coordinates.size()),
                      scalars, out, [at](int64_t i) { return at[i]; });
}

}  // namespace corescape::optim
