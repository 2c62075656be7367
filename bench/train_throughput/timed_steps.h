#ifndef CORESCAPE_BENCH_TRAIN_THROUGHPUT_TIMED_STEPS_H_
#define CORESCAPE_BENCH_TRAIN_THROUGHPUT_TIMED_STEPS_H_

// What the training-step benchmarks share: a batch of packed random
// documents, and timing whole steps (forward, backward, AdamW) through any
// model backend, with the optimizer on the host or on the model's device.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/device/stream_profiler.h"
#include "runtime/model/model_config.h"
#include "runtime/model/transformer.h"
#include "runtime/optim/data_parallel_optimizer.h"
#include "runtime/optim/optimizer_registry.h"

namespace corescape::bench {

// `rows` rows of `seq` tokens, each packed with `docs_per_row` equal
// documents (the last takes the remainder), random tokens and targets.
model::ModelBatch PackedRandomBatch(const model::ModelConfig& config, int rows, int seq,
                                    int docs_per_row, uint32_t seed = 7);

struct TimedSteps {
  double step_seconds = 0;       // mean of the timed steps, all of it
  double compute_seconds = 0;    // forward + backward, synchronized
  double optimizer_seconds = 0;  // the optimizer, with the gradients' download when on the host
  // The optimizer's phases (OptimizerStepPhases), means over the timed steps.
  optim::OptimizerStepPhases phases;
  double last_loss = 0;
  // With profile_ops: each op's time per timed step (device time on a GPU),
  // largest first (model::ModelOps::op_profile).
  std::vector<device::StreamProfiler::Total> op_profile;

  // The sparse optimizers' own work: the next mask's selection (top-k),
  // mask coding and packing.
  double sparse_overhead_seconds() const { return phases.select + phases.encode + phases.pack; }
};

enum class OptimizerPlacement {
  kHost,         // gradients downloaded, the optimizer on the host (any backend)
  // The state beside the parameters (a device backend; AdamW, AdamS,
  // topk-adamw and SCAPE's device forms: train::CreatePlacedOptimizer).
  kModelDevice,
};

// AdamW without clipping: what the benchmarks time unless told otherwise.
optim::OptimizerOptions PlainAdamW();

// `warmup` untimed steps, then `steps` timed ones, with the optimizer
// `options` names (every parameter decays) where `placement` says.
// `profile_ops` also profiles the timed steps' ops (which slows them a
// little: time them in a run without it).
absl::StatusOr<TimedSteps> TimeTrainingSteps(
    model::Transformer& model, model::CoreAttentionExecutor& attention,
    const model::ModelBatch& batch, int warmup, int steps,
    OptimizerPlacement placement = OptimizerPlacement::kHost,
    const optim::OptimizerOptions& options = PlainAdamW(), bool profile_ops = false);

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_TRAIN_THROUGHPUT_TIMED_STEPS_H_
