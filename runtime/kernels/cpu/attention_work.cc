#include "runtime/kernels/cpu/attention_work.h"

#include <algorithm>
#include <numeric>

namespace corescape::kernels::cpu {
namespace {

template <typename Item>
void SortByDecreasingCost(std::vector<Item>& items) {
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.cost > b.cost; });
}

// Pairs of task queries [p_begin, p_end) with keys at positions >= key_begin
// and < key_end.
int64_t PairsWithKeys(int64_t p_begin, int64_t p_end, int64_t key_begin,
                      int64_t key_end) {
  const int64_t first = std::max(p_begin, key_begin);
  if (first >= p_end) return 0;
  // Queries before `full` see part of the keys (p + 1 - key_begin of them),
  // the rest see all of them.
  const int64_t full = std::clamp(key_end - 1, first, p_end);
  const int64_t partial = ((first + 1 - key_begin) + (full - key_begin)) *
                          (full - first) / 2;
  return partial + (p_end - full) * (key_end - key_begin);
}

}  // namespace

std::vector<QueryTile> PlanQueryTiles(const AttentionShape& shape,
                                      absl::Span<const AttentionTask> tasks,
                                      int tile_rows) {
  std::vector<QueryTile> tiles;
  for (int64_t t = 0; t < static_cast<int64_t>(tasks.size()); ++t) {
    const AttentionTask& task = tasks[t];
    for (int64_t p = task.q_begin; p < task.q_end; p += tile_rows) {
      const int64_t p_end = std::min(task.q_end, p + tile_rows);
      const int64_t cost = (p_end * (p_end + 1) - p * (p + 1)) / 2;
      for (int head = 0; head < shape.n_heads; ++head) {
        tiles.push_back({t, head, p, p_end, cost});
      }
    }
  }
  SortByDecreasingCost(tiles);
  return tiles;
}

std::vector<KvRowGroup> GroupByKvRows(absl::Span<const AttentionTask> tasks) {
  std::vector<int64_t> order(tasks.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return tasks[a].kv_row < tasks[b].kv_row;
  });
  std::vector<KvRowGroup> groups;
  for (int64_t t : order) {
    const int64_t begin = tasks[t].kv_row;
    const int64_t end = begin + tasks[t].q_end;
    if (groups.empty() || begin >= groups.back().row_end) {
      groups.push_back({begin, end, {t}});
    } else {
      groups.back().row_end = std::max(groups.back().row_end, end);
      groups.back().tasks.push_back(t);
    }
  }
  for (KvRowGroup& group : groups) {
    std::sort(group.tasks.begin(), group.tasks.end());
  }
  return groups;
}

std::vector<KeyTile> PlanKeyTiles(const AttentionShape& shape,
                                  absl::Span<const AttentionTask> tasks,
                                  absl::Span<const KvRowGroup> groups,
                                  int tile_rows) {
  const int heads_per_kv_head = shape.n_heads / shape.n_kv_heads;
  std::vector<KeyTile> tiles;
  for (int64_t g = 0; g < static_cast<int64_t>(groups.size()); ++g) {
    const KvRowGroup& group = groups[g];
    for (int64_t r = group.row_begin; r < group.row_end; r += tile_rows) {
      const int64_t r_end = std::min(group.row_end, r + tile_rows);
      int64_t pairs = 0;
      for (int64_t t : group.tasks) {
        const AttentionTask& task = tasks[t];
        const int64_t key_begin = std::max(r, task.kv_row) - task.kv_row;
        const int64_t key_end =
            std::min(r_end, task.kv_row + task.q_end) - task.kv_row;
        if (key_begin < key_end) {
          pairs += PairsWithKeys(task.q_begin, task.q_end, key_begin, key_end);
        }
      }
      for (int kv_head = 0; kv_head < shape.n_kv_heads; ++kv_head) {
        tiles.push_back({g, kv_head, r, r_end, pairs * heads_per_kv_head});
      }
    }
  }
  SortByDecreasingCost(tiles);
  return tiles;
}

}  // namespace corescape::kernels::cpu
