#include "scheduler/attention_speeds.h"

namespace corescape::scheduler {

void ServerSpeedEstimates::Record(const std::string& server, uint64_t incarnation,
                                  double cost_units, double seconds) {
  Estimate& estimate = estimates_[server];
  if (estimate.speed.measurements() == 0 || estimate.incarnation != incarnation) {
    estimate = Estimate{incarnation, planner::SpeedEstimate(smoothing_)};
  }
  estimate.speed.Record(cost_units, seconds);
}

std::optional<double> ServerSpeedEstimates::Speed(const std::string& server,
                                                  uint64_t incarnation) const {
  auto it = estimates_.find(server);
  if (it == estimates_.end() || it->second.incarnation != incarnation) return std::nullopt;
  return it->second.speed.Speed();
}

int64_t ServerSpeedEstimates::Reports(const std::string& server, uint64_t incarnation) const {
  auto it = estimates_.find(server);
  if (it == estimates_.end() || it->second.incarnation != incarnation) return 0;
  return it->second.speed.measurements();
}

}  // namespace corescape::scheduler
