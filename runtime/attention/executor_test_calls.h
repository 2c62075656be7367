#ifndef CORESCAPE_RUNTIME_ATTENTION_EXECUTOR_TEST_CALLS_H_
#define CORESCAPE_RUNTIME_ATTENTION_EXECUTOR_TEST_CALLS_H_

// What the executors' tests share: random tensors for a batch of tasks, the
// calls over them, and comparing the results with the local kernel's.

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/model/core_attention_executor.h"
#include "runtime/model/model_test_util.h"
#include "runtime/model/transformer.h"

namespace corescape::attention {

struct RandomBatch {
  int64_t rows = 0;
  std::vector<kernels::AttentionTask> tasks;
  std::vector<float> q, k, v, d_o;
};

// Fills b.q, b.k, b.v, b.d_o (b.rows rows) with standard normal values.
void FillRandomTensors(std::mt19937& rng, const kernels::AttentionShape& shape, RandomBatch& b);

struct Outputs {
  std::vector<float> o, lse, d_q, d_k, d_v;
};
// Zeroed outputs for `rows` rows of `shape`.
Outputs ZeroOutputs(const kernels::AttentionShape& shape, int64_t rows);

// Layer `layer`'s calls over `b`, writing into `out`.
model::AttentionForwardCall ForwardCall(int layer, const kernels::AttentionShape& shape,
                                        const RandomBatch& b, Outputs& out);
model::AttentionBackwardCall BackwardCall(int layer, const kernels::AttentionShape& shape,
                                          const RandomBatch& b, Outputs& out);

// Forward of every layer, then (with `backward`) backward of every layer,
// on the same tensors: each layer must give the same answer.
absl::Status RunCalls(model::CoreAttentionExecutor& executor, const kernels::AttentionShape& shape,
                      int layers, const RandomBatch& b, bool backward, Outputs& out);

// max |a - b| / max |b| (0 when both are zero).
double RelativeError(const std::vector<float>& a, const std::vector<float>& b);

using model::SmallModelConfig;

using model::AppendDocument;

// What one worker's model run leaves: a loss sum per micro-batch and the
// accumulated gradients.
struct ModelRun {
  std::vector<double> losses;
  std::vector<float> gradients;
};

// Runs a fresh model of `config` (weights seeded 11) over `batches` through
// `executor`: forward of each, backward of all but the second, which stands
// for validation. Failures are reported through gtest.
ModelRun RunModel(const model::ModelConfig& config, const std::vector<model::ModelBatch>& batches,
                  model::CoreAttentionExecutor& executor);

// Expects each worker's run to match the expected one: three losses, each
// within 1e-5 relative, and every gradient tensor within 1e-5 relative error.
void ExpectSameModelRuns(const model::ModelConfig& config, const std::vector<ModelRun>& actual,
                         const std::vector<ModelRun>& expected);

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_EXECUTOR_TEST_CALLS_H_
