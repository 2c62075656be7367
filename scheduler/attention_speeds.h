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

namespace corescape::scheduler {

// A weight never goes beyond this factor from the mean: one absurd timing
// (a stalled process, a clock jump) must not starve or flood a server.
inline constexpr double kMaxSpeedWeight = 10.0;

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
    double cost_units = 0;
    double seconds = 0;
    int64_t reports = 0;
  };
  const double smoothing_;
  std::map<std::string, Estimate> estimates_;
};

// Relative speeds with mean 1, parallel to `speeds`. An unmeasured server
// (nullopt) is taken to be as fast as the mean of the measured ones; with
// none measured every weight is 1. Weights are clamped to
// [1/kMaxSpeedWeight, kMaxSpeedWeight] before renormalising, so none ends
// far outside that range.
std::vector<double> NormalisedSpeedWeights(const std::vector<std::optional<double>>& speeds);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_ATTENTION_SPEEDS_H_
