#include "runtime/model/model_test_util.h"

#include <cmath>

namespace corescape::model {

ModelConfig SmallModelConfig(int max_seq_len) {
  ModelConfig config;
  config.n_layers = 2;
  config.d_model = 32;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.d_ff = 64;
  config.vocab_size = 50;
  config.max_seq_len = max_seq_len;
  return config;
}

void AppendDocument(std::mt19937& rng, const ModelConfig& config, int row, int start, int length,
                    ModelBatch& b) {
  const int64_t offset = int64_t{row} * b.seq_len + start;
  b.attention_tasks.push_back({0, length, offset, offset});
  for (int i = 0; i < length; ++i) {
    b.tokens.push_back(static_cast<int32_t>(rng() % config.vocab_size));
    b.positions.push_back(i);
    b.targets.push_back(i + 1 < length ? static_cast<int32_t>(rng() % config.vocab_size) : -1);
  }
}

ModelBatch RandomPackedBatch(std::mt19937& rng, const ModelConfig& config, int rows, int seq_len) {
  ModelBatch b;
  b.batch_size = rows;
  b.seq_len = seq_len;
  for (int row = 0; row < rows; ++row) {
    int start = 0;
    while (start < seq_len) {
      const int length = std::min<int>(seq_len - start, 1 + static_cast<int>(rng() % seq_len));
      AppendDocument(rng, config, row, start, length, b);
      start += length;
    }
  }
  return b;
}

absl::StatusOr<TrainingRun> RunTrainingSteps(Transformer& model, CoreAttentionExecutor& attention,
                                             const std::vector<ModelBatch>& batches, int steps,
                                             float lr) {
  TrainingRun run;
  for (int step = 0; step < steps; ++step) {
    if (absl::Status s = model.ZeroGradients(); !s.ok()) return s;
    double loss_sum = 0.0;
    for (const ModelBatch& batch : batches) {
      Activations activations;
      auto loss = model.Forward(batch, attention, activations);
      if (!loss.ok()) return loss.status();
      loss_sum += loss->loss_sum;
      if (absl::Status s = model.Backward(attention, activations, 1.0f / 1000); !s.ok()) return s;
    }
    if (absl::Status s = model.DownloadGradients(); !s.ok()) return s;
    run.losses.push_back(loss_sum);
    run.gradients.push_back(model.gradients());
    std::vector<float>& theta = model.parameters();
    const std::vector<float>& g = model.gradients();
    for (size_t i = 0; i < theta.size(); ++i) theta[i] -= lr * g[i];
  }
  run.parameters = model.parameters();
  return run;
}

double Cosine(const float* a, const float* b, int64_t n) {
  double dot = 0.0, aa = 0.0, bb = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    dot += double{a[i]} * b[i];
    aa += double{a[i]} * a[i];
    bb += double{b[i]} * b[i];
  }
  if (aa == 0.0 && bb == 0.0) return 1.0;
  return dot / std::sqrt(aa * bb);
}

}  // namespace corescape::model
