#ifndef CORESCAPE_SCHEDULER_ATTENTION_WEIGHT_PUSHES_H_
#define CORESCAPE_SCHEDULER_ATTENTION_WEIGHT_PUSHES_H_

// When the scheduler sends a DISAGGREGATED job's workers the attention
// servers' speed weights (AttentionSpeedWeights). Worker rank 0 hands its
// newest weights to every participant with each micro-batch's document
// lengths, so a push changes the plans from the next micro-batch on; the
// scheduler stays off the critical path. Plain data, no locking:
// AttentionPlanning guards it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "corescape/v1/node.pb.h"

namespace corescape::scheduler {

struct WeightPushOptions {
  // A push needs some weight to differ by more than this fraction from what
  // the workers have: noise in the timings must not flood the sessions.
  double min_change = 0.02;
  // Unforced pushes of one job at most this often: timings of small
  // micro-batches jitter by several percent, and each push is a plan change
  // (and a log line) on every participant.
  absl::Duration min_interval = absl::Seconds(5);
};

class SpeedWeightPushes {
 public:
  explicit SpeedWeightPushes(WeightPushOptions options) : options_(options) {}

  // What to send the workers of `job_id`, whose current servers (in
  // assignment order) have `weights`, or nullopt. The workers start every
  // generation and attention epoch with equal weights; a push goes out
  // when `forced` (Rebalance), or when some weight moved more than
  // min_change from what they have and the last push is min_interval old.
  // Versions count per job from 1 and only grow (while this scheduler runs).
  std::optional<v1::AttentionSpeedWeights> Next(const std::string& job_id, uint64_t generation,
                                                uint64_t attention_epoch,
                                                const std::vector<double>& weights,
                                                absl::Time now, bool forced);

  // The weights the workers of `job_id` plan with in this generation and
  // attention epoch: the last sent, or — none sent yet — version 0 with
  // equal weights for `servers` servers. The scheduler's step plans use
  // them, so a shipped plan is the one the participants would make.
  struct Sent {
    uint64_t version = 0;
    std::vector<double> weights;  // one per server of the epoch
  };
  Sent WorkersWeights(const std::string& job_id, uint64_t generation, uint64_t attention_epoch,
                      int servers) const;

  void Forget(const std::string& job_id) { jobs_.erase(job_id); }

 private:
  struct Pushed {
    uint64_t generation = 0;
    uint64_t attention_epoch = 0;
    uint64_t version = 0;
    std::vector<double> weights;  // what the workers have
    bool sent = false;            // in this generation and epoch
    absl::Time at = absl::InfinitePast();
  };
  const WeightPushOptions options_;
  std::map<std::string, Pushed> jobs_;
};

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_ATTENTION_WEIGHT_PUSHES_H_
