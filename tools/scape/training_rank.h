#ifndef CORESCAPE_TOOLS_SCAPE_TRAINING_RANK_H_
#define CORESCAPE_TOOLS_SCAPE_TRAINING_RANK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/optim/rank_group.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/optim/scape_optimizer.h"
#include "runtime/train/data_parallel_trainer.h"

namespace corescape::scape_tool {

// One data-parallel training run: P ranks, each with its own model replica,
// loader (rank r of P) and optimizer. Same seed ⇒ same initial weights and
// the same global batches for every method and every P-rank mode (threads
// in one process, or one process per rank over the data plane), so runs
// differ only by the optimizer.
struct DriverConfig {
  std::string data;                 // `corescape data prepare` output
  std::string model = "tiny";
  int32_t ranks = 4;
  int32_t seq_len = 128;
  int32_t micro_batch = 8;          // rows per rank per step
  int64_t steps = 400;
  std::string method = optim::OptimizerName(optim::OptimizerKind::kScape);
  double lr = 1e-3;
  double min_lr = 0.0;
  int64_t lr_warmup = 40;
  std::string schedule = "cosine";
  optim::ScapeConfig scape;         // AdamS/AdamW hyper-parameters too (scape.adams)
  bool validate = true;             // validation loss before, every eval_interval and at the end
  int64_t eval_interval = 100;      // <= 0: only before and at the end
  uint64_t seed = 1;
  std::string csv;                  // per-step curve, if set (in-process driver)
  double grad_clip = optim::kDefaultGradClip;  // where the optimizer clips (as in a job)
};

// The trainer configuration of one rank: what a job with these settings
// would resolve to (one micro-batch per step, one thread).
absl::StatusOr<train::TrainerConfig> TrainerConfigFor(const DriverConfig& config);

// One step as one rank saw it.
struct StepTrace {
  int64_t step = 0;             // 1-based
  double train_loss = 0;        // of the global batch (same on every rank)
  double val_loss = -1;         // -1: not validated at this step
  double lr = 0;
  bool dense = true;
  int64_t synced_values = 0;
  int64_t bytes_sent = 0;       // by the optimizer during Step (its RankGroup's counters)
  int64_t bytes_received = 0;
  // The optimizer group's counters from the start to the end of the whole
  // step. On the data plane an asynchronous mask exchange is counted when it
  // completes, often during the next forward/backward, i.e. outside Step:
  // these catch it (in-process groups count at issue, inside Step).
  int64_t window_bytes_sent = 0;
  int64_t window_bytes_received = 0;
  int64_t mask_part_bytes = 0;  // this rank's encoded mask part for the next step (0: none)
  std::string mask_encoding;
  double step_seconds = 0;      // batch, forward, backward, loss all-reduce, optimizer step
  double comm_seconds = 0;      // blocked in the optimizer's collectives
  double control_seconds = 0;   // blocked in the loss/token all-reduce (waits for the slowest rank)
  double elapsed_seconds = 0;   // since the first step began
};

// Where one rank ended, with checksums that must agree across P-rank modes.
struct RankOutcome {
  int rank = 0;
  int world_size = 1;
  int64_t parameters = 0;
  int64_t dense_bytes_per_step = 0;  // a ring all-reduce of all N floats, sent by this rank
  double initial_val_loss = -1;
  double final_val_loss = -1;
  std::vector<StepTrace> steps;
  uint32_t parameters_crc32c = 0;
  uint32_t first_moment_crc32c = 0;
  bool has_residual = false;         // SCAPE only: the local residual and sync steps
  uint32_t residual_crc32c = 0;
  uint32_t last_sync_crc32c = 0;
  // SCAPE only (-1 otherwise): share of coordinates synchronized at least
  // once after the dense warm-up, mean steps since the last sync,
  // ‖residual‖ / ‖m‖.
  double coverage = -1;
  double mean_age = -1;
  double residual_to_momentum = -1;
  double seconds = 0;                // training steps only
};

// Runs rank `optimizer_group.rank()` of the training on the production
// DataParallelTrainer (the worker's optimizer construction, clipping and
// validation): the optimizer talks
// through `optimizer_group` (its bytes are the measured traffic), token
// counts and losses through `control`. `after_step` (optional) runs after
// every step on the calling thread; an error from it stops the run.
// A non-finite training loss stops the run with "diverged at step N".
absl::StatusOr<RankOutcome> RunTrainingRank(
    const DriverConfig& config, optim::RankGroup& optimizer_group, optim::RankGroup& control, const std::function<absl::Status(const StepTrace&)>& after_step);

}  // namespace corescape::scape_tool

#endif  // CORESCAPE_TOOLS_SCAPE_TRAINING_RANK_H_
