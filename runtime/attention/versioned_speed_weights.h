#ifndef CORESCAPE_RUNTIME_ATTENTION_VERSIONED_SPEED_WEIGHTS_H_
#define CORESCAPE_RUNTIME_ATTENTION_VERSIONED_SPEED_WEIGHTS_H_

// The attention servers' relative speeds the participants plan with. The
// scheduler learns them and pushes them to the workers; worker rank 0 sends
// its newest ones to every other rank with its document lengths at the
// forward of layer 0 of every micro-batch, and every participant plans that
// micro-batch with rank 0's weights — so all compute the same plan, whatever
// each worker has received from the scheduler by then.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/planner/speed_estimate.h"

namespace corescape::attention {

// One set of weights and the scheduler's version of it, which the plans made
// with it record (MicroBatchPlan::speed_weights_version).
struct VersionedSpeedWeights {
  uint64_t version = 0;         // 0: equal speeds (nothing received yet)
  std::vector<double> weights;  // one per attention server, in rank order

  static VersionedSpeedWeights Equal(int32_t servers);
  bool operator==(const VersionedSpeedWeights&) const = default;
  // "version 3 (1.333, 0.667)"
  std::string Describe() const;
};

// A double in an int64 word of a documents message, bit for bit.
int64_t DoubleToWord(double value);
double WordToDouble(int64_t word);

// The widest relative weight (mean 1) planner::NormalisedSpeedWeights can
// give: clamped to kMaxSpeedWeight around the mean, then renormalised.
// Beyond it a weight is not one the scheduler made, and the planner's
// capacities (total work × weight) could overflow to inf − inf.
inline constexpr double kMaxRelativeSpeedWeight = planner::kMaxSpeedWeight * planner::kMaxSpeedWeight;

// OK if there is one weight per server, each finite, > 0 and in
// [1/max_weight, max_weight]; otherwise InvalidArgument naming `source`,
// and the count or the bad weight. In-place workers announce absolute
// speeds (normalised before planning): they pass max_weight = infinity.
absl::Status ValidateSpeedWeights(absl::Span<const double> weights, int32_t servers,
                                  absl::string_view source,
                                  double max_weight = kMaxRelativeSpeedWeight);

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_VERSIONED_SPEED_WEIGHTS_H_
