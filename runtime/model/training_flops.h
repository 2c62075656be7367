#ifndef CORESCAPE_RUNTIME_MODEL_TRAINING_FLOPS_H_
#define CORESCAPE_RUNTIME_MODEL_TRAINING_FLOPS_H_

#include "runtime/model/model_config.h"
#include "runtime/model/transformer.h"

namespace corescape::model {

// Model FLOPs of one forward and backward over `batch`, as MFU is
// conventionally counted: 6 per token per weight of the matrices the token
// is multiplied by (the embedding lookup is free; the LM head counts, tied
// or not) plus causal attention's 12·layers·n_heads·head_dim per key a
// query attends to (QKᵀ and PV: 4 forward, 8 backward). Padding rows count
// as tokens; recomputation and the optimizer do not count.
double TrainingFlops(const ModelConfig& config, const ModelBatch& batch);

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_TRAINING_FLOPS_H_
