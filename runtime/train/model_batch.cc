#include "runtime/train/model_batch.h"

namespace corescape::train {

model::ModelBatch ToModelBatch(const data::PackedBatch& packed) {
  model::ModelBatch batch;
  batch.batch_size = packed.batch_size;
  batch.seq_len = packed.seq_len;
  batch.tokens = packed.tokens;
  batch.targets = packed.targets;
  batch.positions = packed.positions;
  batch.attention_tasks.reserve(packed.segments.size());
  for (const data::Segment& segment : packed.segments) {
    kernels::AttentionTask task;
    const int64_t first = int64_t{segment.row} * packed.seq_len + segment.start;
    task.q_begin = 0;
    task.q_end = segment.length;
    task.q_row = first;
    task.kv_row = first;
    batch.attention_tasks.push_back(task);
  }
  return batch;
}

}  // namespace corescape::train
