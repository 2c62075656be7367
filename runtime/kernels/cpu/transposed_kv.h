#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_TRANSPOSED_KV_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_TRANSPOSED_KV_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cpu/attention_work.h"
#include "runtime/kernels/cpu/block_ops.h"

namespace corescape::kernels::cpu {

// K and V of the rows the tasks use, copied feature-major in key tiles: the
// rows of each KV row group are cut into kKeyTile-row tiles from the group's
// first row, and each (tile, kv head) is stored as a [head_dim][kKeyTile]
// block. Score products Q K^T and dO V^T then take K^T / V^T as plain
// row-major operands, which OpenBLAS multiplies in its unpacked small-matrix
// kernels (it packs every B-transposed tile first, costing about as much as
// the product), and each block is contiguous, unlike a whole-document
// transpose whose power-of-two row strides thrash the cache.
class TransposedKv {
 public:
  TransposedKv(const AttentionShape& shape,
               absl::Span<const AttentionTask> tasks,
               absl::Span<const KvRowGroup> groups, const float* k,
               const float* v, ThreadPool* pool);

  // Key positions [j, TileEnd(task, j)) of `task` lie in one block.
  int64_t TileEnd(int64_t task, int64_t j) const {
    const int64_t group_row = RowInGroup(task, j);
    return j + (kKeyTile - group_row % kKeyTile);
  }

  // The [head_dim][kKeyTile] operand (row stride kKeyTile) whose first column
  // is key position j of `task`; valid for keys up to TileEnd(task, j).
  const float* Keys(int64_t task, int64_t j, int kv_head) const {
    return k_t_.data() + Offset(task, j, kv_head);
  }
  const float* Values(int64_t task, int64_t j, int kv_head) const {
    return v_t_.data() + Offset(task, j, kv_head);
  }

 private:
  int64_t RowInGroup(int64_t task, int64_t j) const {
    return task_kv_row_[task] + j - group_row_begin_[task_group_[task]];
  }
  int64_t Offset(int64_t task, int64_t j, int kv_head) const {
    const int64_t group_row = RowInGroup(task, j);
    const int64_t tile = group_row / kKeyTile;
    return group_offset_[task_group_[task]] +
           (tile * n_kv_heads_ + kv_head) * tile_floats_ +
           group_row % kKeyTile;
  }

  int n_kv_heads_;
  int64_t tile_floats_;  // head_dim * kKeyTile
  std::vector<int64_t> task_group_;
  std::vector<int64_t> task_kv_row_;
  std::vector<int64_t> group_offset_;
  std::vector<int64_t> group_row_begin_;
  std::vector<float> k_t_;
  std::vector<float> v_t_;
};

}  // namespace corescape::kernels::cpu

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_TRANSPOSED_KV_H_
