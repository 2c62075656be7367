#ifndef CORESCAPE_TOOLS_SCAPE_SCAPE_DRIVER_H_
#define CORESCAPE_TOOLS_SCAPE_SCAPE_DRIVER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/scape/training_rank.h"

namespace corescape::scape_tool {

// The in-process P-rank mode: the P ranks of RunTrainingRank as threads of
// this process, meeting in InProcessHubs (one for the optimizer, whose bytes
// are the measured traffic, one for token counts and losses). The hubs sum
// in the data plane's order, so this equals P processes over UCX bitwise.
struct DriverSummary {
  int64_t parameters = 0;
  double initial_val_loss = 0;
  double final_val_loss = 0;
  double final_train_loss = 0;      // mean of the last 20 steps
  double bytes_per_step = 0;        // per worker, mean over all steps and ranks
  double sparse_bytes_per_step = 0; // per worker, mean over non-dense steps (0 if none)
  double dense_bytes_per_step = 0;  // a ring all-reduce of N floats, per worker
  double seconds = 0;
  bool diverged = false;
  // SCAPE only (rank 0 at the end): see RankOutcome.
  double coverage = -1;
  double mean_age = -1;
  double residual_to_momentum = -1;
  std::vector<RankOutcome> ranks;   // every rank's outcome, by rank (empty if diverged)
};

struct StepRecord {
  int64_t step = 0;  // 1-based
  double train_loss = 0;
  double val_loss = -1;
  double lr = 0;
  double bytes_sent = 0;  // mean over ranks, this step
  int64_t synced_values = 0;
  bool dense = true;
  int64_t mask_part_bytes = 0;  // rank 0's encoded part for the next step (0: none)
  std::string mask_encoding;    // its encoding
  double elapsed = 0;
};

absl::StatusOr<DriverSummary> RunDataParallelTraining(
    const DriverConfig& config, const std::function<void(const StepRecord&)>& on_step);

}  // namespace corescape::scape_tool

#endif  // CORESCAPE_TOOLS_SCAPE_SCAPE_DRIVER_H_
