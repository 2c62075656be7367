#ifndef CORESCAPE_RUNTIME_MODEL_MODEL_TEST_UTIL_H_
#define CORESCAPE_RUNTIME_MODEL_MODEL_TEST_UTIL_H_

// What tests of the training step share: random batches of packed
// documents, and a few steps of forward, backward and a plain SGD update
// through any backend.

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model/core_attention_executor.h"
#include "runtime/model/model_config.h"
#include "runtime/model/transformer.h"

namespace corescape::model {

// A two-layer model small enough for many runs per test (4 heads, 2 KV heads).
ModelConfig SmallModelConfig(int max_seq_len);

// Appends one document of `length` random tokens to row `row` of `b` at
// `start`, with its attention task (the last token has no target).
void AppendDocument(std::mt19937& rng, const ModelConfig& config, int row, int start, int length,
                    ModelBatch& b);

// `rows` rows of `seq_len` tokens, each packed full with documents of
// random lengths (1 to seq_len).
ModelBatch RandomPackedBatch(std::mt19937& rng, const ModelConfig& config, int rows, int seq_len);

// What `steps` steps over the same micro-batches leave: per step the summed
// loss of its micro-batches and the accumulated gradients, and the
// parameters after the last update.
struct TrainingRun {
  std::vector<double> losses;
  std::vector<std::vector<float>> gradients;
  std::vector<float> parameters;
};

// Each step: zero the gradients, forward and backward of every batch
// (loss gradient scaled by 1/1000), download the gradients, then
// θ −= lr·g on the host (so the next forward uploads the new parameters).
absl::StatusOr<TrainingRun> RunTrainingSteps(Transformer& model, CoreAttentionExecutor& attention,
                                             const std::vector<ModelBatch>& batches, int steps,
                                             float lr);

// Cosine similarity of two equally long vectors, in double (1 when both
// are zero).
double Cosine(const float* a, const float* b, int64_t n);

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_MODEL_TEST_UTIL_H_
