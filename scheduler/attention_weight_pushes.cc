#include "scheduler/attention_weight_pushes.h"

#include <algorithm>
#include <cmath>

namespace corescape::scheduler {
namespace {

// The largest relative difference between two weight vectors of one length.
double MaxRelativeChange(const std::vector<double>& from, const std::vector<double>& to) {
  double change = 0;
  for (size_t i = 0; i < from.size(); ++i) {
    change = std::max(change, std::abs(to[i] - from[i]) / from[i]);
  }
  return change;
}

}  // namespace

std::optional<v1::AttentionSpeedWeights> SpeedWeightPushes::Next(
    const std::string& job_id, uint64_t generation, uint64_t attention_epoch,
    const std::vector<double>& weights, absl::Time now, bool forced) {
  if (weights.empty()) return std::nullopt;
  Pushed& pushed = jobs_[job_id];
  if (pushed.generation != generation || pushed.attention_epoch != attention_epoch ||
      pushed.weights.size() != weights.size()) {
    // New executors: they plan with equal weights until told otherwise.
    pushed.generation = generation;
    pushed.attention_epoch = attention_epoch;
    pushed.weights.assign(weights.size(), 1.0);
    pushed.sent = false;
    pushed.at = absl::InfinitePast();
  }
  if (!forced && (MaxRelativeChange(pushed.weights, weights) <= options_.min_change ||
                  now - pushed.at < options_.min_interval)) {
    return std::nullopt;
  }
  pushed.weights = weights;
  pushed.sent = true;
  pushed.at = now;
  ++pushed.version;
  v1::AttentionSpeedWeights command;
  command.set_job_id(job_id);
  command.set_generation(generation);
  command.set_attention_epoch(attention_epoch);
  command.set_version(pushed.version);
  for (double w : weights) command.add_weights(w);
  return command;
}

SpeedWeightPushes::Sent SpeedWeightPushes::WorkersWeights(const std::string& job_id,
                                                          uint64_t generation,
                                                          uint64_t attention_epoch,
                                                          int servers) const {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end() && it->second.sent && it->second.generation == generation &&
      it->second.attention_epoch == attention_epoch &&
      static_cast<int>(it->second.weights.size()) == servers) {
    return {it->second.version, it->second.weights};
  }
  return {0, std::vector<double>(servers, 1.0)};
}

}  // namespace corescape::scheduler
