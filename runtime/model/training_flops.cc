#include "runtime/model/training_flops.h"

namespace corescape::model {

double TrainingFlops(const ModelConfig& config, const ModelBatch& batch) {
  const double d = config.d_model;
  const double per_layer =
      d * config.q_width() * 2 + d * config.kv_width() * 2 + 3.0 * d * config.d_ff;
  const double matrices = config.n_layers * per_layer + d * config.vocab_size;
  // Keys attended: query position i of a document sees keys [0, i].
  double keys = 0;
  for (const kernels::AttentionTask& task : batch.attention_tasks) {
    const double end = static_cast<double>(task.q_end), begin = static_cast<double>(task.q_begin);
    keys += (end * (end + 1) - begin * (begin + 1)) / 2;
  }
  return 6.0 * matrices * static_cast<double>(batch.rows()) +
         12.0 * config.n_layers * config.q_width() * keys;
}

}  // namespace corescape::model
