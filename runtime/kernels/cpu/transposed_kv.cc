#include "runtime/kernels/cpu/transposed_kv.h"

namespace corescape::kernels::cpu {

TransposedKv::TransposedKv(const AttentionShape& shape,
                           absl::Span<const AttentionTask> tasks,
                           absl::Span<const KvRowGroup> groups, const float* k,
                           const float* v, ThreadPool* pool)
    : n_kv_heads_(shape.n_kv_heads),
      tile_floats_(int64_t{shape.head_dim} * kKeyTile),
      task_group_(tasks.size()) {
  // (group, tile) of every block, in storage order.
  std::vector<std::pair<int64_t, int64_t>> tiles;
  int64_t floats = 0;
  for (int64_t g = 0; g < static_cast<int64_t>(groups.size()); ++g) {
    const KvRowGroup& group = groups[g];
    for (int64_t t : group.tasks) task_group_[t] = g;
    group_offset_.push_back(floats);
    group_row_begin_.push_back(group.row_begin);
    const int64_t group_tiles =
        (group.row_end - group.row_begin + kKeyTile - 1) / kKeyTile;
    for (int64_t tile = 0; tile < group_tiles; ++tile) tiles.push_back({g, tile});
    floats += group_tiles * n_kv_heads_ * tile_floats_;
  }
  for (const AttentionTask& task : tasks) task_kv_row_.push_back(task.kv_row);
  // Zeros in the columns past a group's last row keep every block finite.
  k_t_.assign(floats, 0.0f);
  v_t_.assign(floats, 0.0f);

  const int head_dim = shape.head_dim;
  const int64_t kv_stride = int64_t{n_kv_heads_} * head_dim;
  auto transpose = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto [g, tile] = tiles[i];
      const int64_t first_row = groups[g].row_begin + tile * kKeyTile;
      const int64_t rows = std::min<int64_t>(kKeyTile, groups[g].row_end - first_row);
      for (int kv_head = 0; kv_head < n_kv_heads_; ++kv_head) {
        const int64_t out =
            group_offset_[g] + (tile * n_kv_heads_ + kv_head) * tile_floats_;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t in = (first_row + r) * kv_stride + kv_head * head_dim;
          for (int c = 0; c < head_dim; ++c) {
            k_t_[out + c * kKeyTile + r] = k[in + c];
            v_t_[out + c * kKeyTile + r] = v[in + c];
          }
        }
      }
    }
  };
  const int64_t items = static_cast<int64_t>(tiles.size());
  ParallelForOn(pool, items, transpose);
}

}  // namespace corescape::kernels::cpu
