#ifndef CORESCAPE_BENCH_ATTENTION_STRAGGLER_ATTENTION_STEP_H_
#define CORESCAPE_BENCH_ATTENTION_STRAGGLER_ATTENTION_STEP_H_

// One worker's core attention for one training step, as the trainer calls
// it: the forward of layers 0..L-1, then the backward of layers L-1..0,
// through whichever executor (local kernel or attention servers).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/attention_straggler/bench_config.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/model/core_attention_executor.h"

namespace corescape::bench {

// A worker's micro-batch: its documents packed back to back (whole-document
// tasks, q_begin = 0), random Q/K/V/dO that every layer reuses (the kernel's
// time does not depend on the values), and the outputs.
struct WorkerTensors {
  int64_t rows = 0;
  std::vector<kernels::AttentionTask> tasks;
  std::vector<float> q, k, v, d_o;
  std::vector<std::vector<float>> o, lse;  // [layer], kept for that layer's backward
  std::vector<float> d_q, d_k, d_v;        // of the latest backward call (layer 0)
};

// Deterministic in (config.seed, worker): both modes see the same numbers.
WorkerTensors MakeWorkerTensors(const StragglerConfig& config, int worker);

struct StepSeconds {
  double forward = 0;
  double backward = 0;
};

absl::StatusOr<StepSeconds> RunAttentionStep(model::CoreAttentionExecutor& executor,
                                             const StragglerConfig& config,
                                             WorkerTensors& tensors);

// The outputs compared between modes, in this order, and their file names.
inline constexpr const char* kOutputNames[] = {"o", "lse", "d_q", "d_k", "d_v"};
std::vector<const std::vector<float>*> Outputs(const WorkerTensors& tensors);
// "<dir>/<mode>-worker<w>-<name>.f32": raw floats.
std::string OutputPath(const std::string& dir, AttentionMode mode, int worker,
                       const std::string& name);
absl::Status WriteOutputs(const WorkerTensors& tensors, const std::string& dir,
                          AttentionMode mode, int worker);

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_ATTENTION_STRAGGLER_ATTENTION_STEP_H_
