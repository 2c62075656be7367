#include "runtime/planner/speed_estimate.h"

#include <algorithm>
#include <cmath>

namespace corescape::planner {

void SpeedEstimate::Record(double cost_units, double seconds) {
  if (!(std::isfinite(cost_units) && cost_units > 0 && std::isfinite(seconds) && seconds > 0)) {
    return;
  }
  if (measurements_ == 0) {
    cost_units_ = cost_units;
    seconds_ = seconds;
  } else {
    cost_units_ = smoothing_ * cost_units + (1 - smoothing_) * cost_units_;
    seconds_ = smoothing_ * seconds + (1 - smoothing_) * seconds_;
  }
  ++measurements_;
}

std::optional<double> SpeedEstimate::Speed() const {
  if (measurements_ == 0 || !(seconds_ > 0)) return std::nullopt;
  return cost_units_ / seconds_;
}

std::vector<double> NormalisedSpeedWeights(const std::vector<std::optional<double>>& speeds) {
  std::vector<double> weights(speeds.size(), 1.0);
  double measured_sum = 0;
  int measured = 0;
  for (const auto& speed : speeds) {
    if (speed && *speed > 0) {
      measured_sum += *speed;
      ++measured;
    }
  }
  if (measured == 0) return weights;
  const double measured_mean = measured_sum / measured;
  for (size_t i = 0; i < speeds.size(); ++i) {
    weights[i] = speeds[i] && *speeds[i] > 0 ? *speeds[i] / measured_mean : 1.0;
  }
  // Clamp around the mean, renormalise; the clamp is applied again because
  // renormalising can push a clamped weight back out a little.
  for (int round = 0; round < 2; ++round) {
    double sum = 0;
    for (double& w : weights) {
      w = std::clamp(w, 1.0 / kMaxSpeedWeight, kMaxSpeedWeight);
      sum += w;
    }
    const double mean = sum / static_cast<double>(weights.size());
    for (double& w : weights) w /= mean;
  }
  return weights;
}

}  // namespace corescape::planner
