#ifndef CORESCAPE_SCHEDULER_ATTENTION_SPEEDS_H_
#define CORESCAPE_SCHEDULER_ATTENTION_SPEEDS_H_

// How fast each attention server is, learned from the task timings it
// reports (AttentionTaskTiming), and the relative speed weights the planner
// takes. Plain data, no locking: AttentionPlanning guards it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/planner/speed_estimate.h"

namespace corescape::scheduler {

using planner::kMaxSpeedWeight;
using planner::NormalisedSpeedWeights;

class ServerSpeedEstimates {
 public:
  // `smoothing` in (0, 1]: the weight of the newest report.
  explicit ServerSpeedEstimates(double smoothing) : smoothing_(smoothing) {}

  // Exponentially weighted moving averages of cost units and of seconds,
  // speed = their ratio: a report counts in proportion to its size, so tiny
  // micro-batches dominated by fixed overheads barely move the estimate. A
  // new incarnation of the server (a restart, maybe on other hardware)
  // starts afresh. Expects finite cost_units and seconds > 0.
  void Record(const std::string& server, uint64_t incarnation, double cost_units,
              double seconds);

  // Cost units per second; nullopt before the first report of that
  // incarnation.
  std::optional<double> Speed(const std::string& server, uint64_t incarnation) const;
  int64_t Reports(const std::string& server, uint64_t incarnation) const;

 private:
  struct Estimate {
    uint64_t incarnation = 0;
    planner::SpeedEstimate speed;
  };
  const double smoothing_;
  std::map<std::string, Estimate> estimates_;
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_ATTENTION_SPEEDS_H_
