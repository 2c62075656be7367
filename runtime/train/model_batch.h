#ifndef CORESCAPE_RUNTIME_TRAIN_MODEL_BATCH_H_
#define CORESCAPE_RUNTIME_TRAIN_MODEL_BATCH_H_

#include "runtime/data/batch_loader.h"
#include "runtime/model/transformer.h"

namespace corescape::train {

// The loader's packed micro-batch as the model takes it: one core-attention
// task per segment (each document piece attends only to itself; padding
// belongs to no task).
model::ModelBatch ToModelBatch(const data::PackedBatch& packed);

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_MODEL_BATCH_H_
