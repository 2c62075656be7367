#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_ATTENTION_WORK_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_ATTENTION_WORK_H_

// How a call's tasks are cut into independent work items for the pool. Each
// item writes outputs no other item writes, so the results do not depend on
// which thread runs which item, or in what order.

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "runtime/kernels/core_attention.h"

namespace corescape::kernels::cpu {

// Query positions [p_begin, p_end) of one task and one query head: owns
// those rows of O/LSE (forward) or dQ (backward).
struct QueryTile {
  int64_t task;
  int head;
  int64_t p_begin;
  int64_t p_end;
  int64_t cost;  // causal (query, key) pairs
};

// Tasks whose K/V row ranges [kv_row, kv_row + q_end) overlap, transitively:
// only they add into the same dK/dV rows.
struct KvRowGroup {
  int64_t row_begin;
  int64_t row_end;
  std::vector<int64_t> tasks;  // ascending task index: the summation order
};

// K/V rows [row_begin, row_end) of one kv head within one group: owns those
// rows of dK/dV and sums every contribution to them in a fixed order.
struct KeyTile {
  int64_t group;
  int kv_head;
  int64_t row_begin;
  int64_t row_end;
  int64_t cost;  // causal pairs over the query heads that read this kv head
};

// Both lists come sorted by decreasing cost so that the pool, handing out
// items in order, finishes with the small ones.
std::vector<QueryTile> PlanQueryTiles(const AttentionShape& shape,
                                      absl::Span<const AttentionTask> tasks,
                                      int tile_rows);
std::vector<KvRowGroup> GroupByKvRows(absl::Span<const AttentionTask> tasks);
std::vector<KeyTile> PlanKeyTiles(const AttentionShape& shape,
                                  absl::Span<const AttentionTask> tasks,
                                  absl::Span<const KvRowGroup> groups,
                                  int tile_rows);

}  // namespace corescape::kernels::cpu

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_ATTENTION_WORK_H_
