#include "scheduler/attention_speeds.h"

#include <algorithm>

namespace corescape::scheduler {

void ServerSpeedEstimates::Record(const std::string& server, uint64_t incarnation,
                                  double cost_units, double seconds) {
  Estimate& estimate = estimates_[server];
  if (estimate.reports == 0 || estimate.incarnation != incarnation) {
    estimate = Estimate{incarnation, cost_units, seconds, 1};
    return;
  }
  estimate.cost_units = smoothing_ * cost_units + (1 - smoothing_) * estimate.cost_units;
  estimate.seconds = smoothing_ * seconds + (1 - smoothing_) * estimate.seconds;
  ++estimate.reports;
}

std::optional<double> ServerSpeedEstimates::Speed(const std::string& server,
                                                  uint64_t incarnation) const {
  auto it = estimates_.find(server);
  if (it == estimates_.end() || it->second.incarnation != incarnation ||
      it->second.reports == 0 || !(it->second.seconds > 0)) {
    return std::nullopt;
  }
  return it->second.cost_units / it->second.seconds;
}

int64_t ServerSpeedEstimates::Reports(const std::string& server, uint64_t incarnation) const {
  auto it = estimates_.find(server);
  if (it == estimates_.end() || it->second.incarnation != incarnation) return 0;
  return it->second.reports;
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

}  // namespace corescape::scheduler
