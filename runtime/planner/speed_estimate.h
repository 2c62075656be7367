#ifndef CORESCAPE_RUNTIME_PLANNER_SPEED_ESTIMATE_H_
#define CORESCAPE_RUNTIME_PLANNER_SPEED_ESTIMATE_H_

// Relative server speeds for the planner (AttentionServer::speed), learned
// from measured task times: the scheduler's estimates of attention servers
// (scheduler/attention_speeds.h) and in-place workers' own estimates
// (runtime/attention/in_place_core_attention.h) both use these.

#include <cstdint>
#include <optional>
#include <vector>

namespace corescape::planner {

// A weight never goes beyond this factor from the mean: one absurd timing
// (a stalled process, a clock jump) must not starve or flood a server.
inline constexpr double kMaxSpeedWeight = 10.0;

// Exponentially weighted moving averages of cost units and of seconds,
// speed = their ratio: a measurement counts in proportion to its size, so
// tiny micro-batches dominated by fixed overheads barely move the estimate.
class SpeedEstimate {
 public:
  // `smoothing` in (0, 1]: the weight of the newest measurement.
  explicit SpeedEstimate(double smoothing = 0.3) : smoothing_(smoothing) {}

  // Expects finite cost_units and seconds > 0 (others are ignored).
  void Record(double cost_units, double seconds);
  // Cost units per second; nullopt before the first measurement.
  std::optional<double> Speed() const;
  int64_t measurements() const { return measurements_; }

 private:
  double smoothing_;
  double cost_units_ = 0;
  double seconds_ = 0;
  int64_t measurements_ = 0;
};

// Relative speeds with mean 1, parallel to `speeds`. An unmeasured server
// (nullopt) is taken to be as fast as the mean of the measured ones; with
// none measured every weight is 1. Weights are clamped to
// [1/kMaxSpeedWeight, kMaxSpeedWeight] before renormalising, so none ends
// far outside that range.
std::vector<double> NormalisedSpeedWeights(const std::vector<std::optional<double>>& speeds);

}  // namespace corescape::planner

#endif  // CORESCAPE_RUNTIME_PLANNER_SPEED_ESTIMATE_H_
