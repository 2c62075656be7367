#ifndef CORESCAPE_TOOLS_SCAPE_SCAPE_DRIVER_H_
#define CORESCAPE_TOOLS_SCAPE_SCAPE_DRIVER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::scape_tool {

// One in-process data-parallel training run: P ranks as threads, each with
// its own model replica, loader (rank r of P) and optimizer, meeting in an
// InProcessHub. Same seed ⇒ same initial weights and the same global batches
// for every method, so methods differ only by the optimizer.
struct DriverConfig {
  std::string data;                 // `corescape data prepare` output
  std::string model = "tiny";
  int32_t ranks = 4;
  int32_t seq_len = 128;
  int32_t micro_batch = 8;          // rows per rank per step
  int64_t steps = 400;
  std::string method = "scape";     // adamw | adams | scape | scape-global | topk-adamw
  double lr = 1e-3;
  double min_lr = 0.0;
  int64_t lr_warmup = 40;
  std::string schedule = "cosine";
  optim::ScapeConfig scape;         // AdamS/AdamW hyper-parameters too (scape.adams)
  int64_t eval_interval = 100;      // and at the end
  uint64_t seed = 1;
  std::string csv;                  // per-step curve, if set
};

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
  // SCAPE only (rank 0 at the end): share of coordinates synchronized at
  // least once after the dense warm-up, mean steps since the last sync,
  // ‖residual‖ / ‖m‖.
  double coverage = -1;
  double mean_age = -1;
  double residual_to_momentum = -1;
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
