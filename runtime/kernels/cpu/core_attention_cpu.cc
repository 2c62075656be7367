#include "runtime/kernels/cpu/core_attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/kernels/cpu/attention_work.h"
#include "runtime/kernels/cpu/block_ops.h"
#include "runtime/kernels/cpu/transposed_kv.h"

namespace corescape::kernels::cpu {
namespace {

// Strides and base pointers of one call. Rows are addressed by document
// position through a task: query p is row q_row + p - q_begin, key j is row
// kv_row + j.
struct Buffers {
  const AttentionShape& shape;
  absl::Span<const AttentionTask> tasks;
  int q_stride;   // floats per Q/O row: n_heads * head_dim
  int kv_stride;  // floats per K/V row: n_kv_heads * head_dim
  int heads_per_kv_head;
  const TransposedKv* kv_t = nullptr;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* o = nullptr;
  const float* lse = nullptr;
  const float* d_o = nullptr;
  float* out_o = nullptr;
  float* out_lse = nullptr;
  float* d_q = nullptr;
  float* d_k = nullptr;
  float* d_v = nullptr;
  // D = rowsum(dO * O) per task query row and head, indexed like LSE.
  float* delta = nullptr;

  Buffers(const AttentionShape& s, absl::Span<const AttentionTask> t)
      : shape(s),
        tasks(t),
        q_stride(s.n_heads * s.head_dim),
        kv_stride(s.n_kv_heads * s.head_dim),
        heads_per_kv_head(s.n_heads / s.n_kv_heads) {}

  int64_t QueryRow(const AttentionTask& task, int64_t p) const {
    return task.q_row + p - task.q_begin;
  }
  int64_t QueryOffset(const AttentionTask& task, int64_t p, int head) const {
    return QueryRow(task, p) * q_stride + int64_t{head} * shape.head_dim;
  }
  int64_t KeyOffset(const AttentionTask& task, int64_t j, int kv_head) const {
    return (task.kv_row + j) * kv_stride + int64_t{kv_head} * shape.head_dim;
  }
  int64_t RowHeadIndex(const AttentionTask& task, int64_t p, int head) const {
    return QueryRow(task, p) * shape.n_heads + head;
  }
};

// Per-thread tiles, reused across items to avoid an allocation per item.
struct Scratch {
  std::vector<float> scores;       // kMaxQueryTile x kKeyTile
  std::vector<float> grad_scores;  // kMaxQueryTile x kKeyTile
  std::vector<float> acc;          // forward O / dQ rows, or a key tile's dK
  std::vector<float> acc2;         // a key tile's dV
  std::vector<float> row_max;
  std::vector<float> row_sum;

  static Scratch& ForThisThread(int head_dim) {
    thread_local Scratch scratch;
    const size_t tile = size_t{kMaxQueryTile} * kKeyTile;
    const size_t rows = std::max(kMaxQueryTile, kKeyTile);
    scratch.scores.resize(tile);
    scratch.grad_scores.resize(tile);
    scratch.acc.resize(rows * head_dim);
    scratch.acc2.resize(rows * head_dim);
    scratch.row_max.resize(kMaxQueryTile);
    scratch.row_sum.resize(kMaxQueryTile);
    return scratch;
  }
};

// Keys of a tile starting at position key_begin that query p may attend.
inline int CausalValid(int64_t p, int64_t key_begin, int keys) {
  return static_cast<int>(std::clamp<int64_t>(p - key_begin + 1, 0, keys));
}

// Scores S = scale * Q K^T of `rows` queries of task t from q against keys
// [key_begin, key_begin + keys), which lie in one transposed K block, into a
// kKeyTile-wide tile.
inline void ScoreTile(const Buffers& b, int64_t t, int kv_head, const float* q,
                      int rows, int64_t key_begin, int keys, float* scores) {
  Gemm(false, false, rows, keys, b.shape.head_dim, b.shape.softmax_scale, q,
       b.q_stride, b.kv_t->Keys(t, key_begin, kv_head), kKeyTile, 0.0f,
       scores, kKeyTile);
}

// Turns a score tile into probabilities P = exp(S - LSE) (0 where masked),
// and fills grad_scores with dS = P * (dO V^T - D). Always inlined so its
// loops are compiled for the calling tile function's instruction set.
[[gnu::always_inline]] inline void ProbabilityAndGradTile(
    const Buffers& b, int64_t t, int head, int64_t p_begin, int rows,
    int64_t key_begin, int keys, float* scores, float* grad_scores) {
  const AttentionTask& task = b.tasks[t];
  const float* d_o = b.d_o + b.QueryOffset(task, p_begin, head);
  Gemm(false, false, rows, keys, b.shape.head_dim, 1.0f, d_o, b.q_stride,
       b.kv_t->Values(t, key_begin, head / b.heads_per_kv_head), kKeyTile,
       0.0f, grad_scores, kKeyTile);
  for (int i = 0; i < rows; ++i) {
    const int64_t index = b.RowHeadIndex(task, p_begin + i, head);
    const int valid = CausalValid(p_begin + i, key_begin, keys);
    float* p_row = scores + i * kKeyTile;
    ExpShiftedRow(p_row, b.lse[index], valid);
    GradScoresRow(p_row, grad_scores + i * kKeyTile, b.delta[index], valid);
  }
}

// The tile functions are compiled for AVX-512, AVX2 and baseline x86-64, and
// the loader picks one per machine: their per-score loops (exp, masks,
// softmax sums) are a third of the time at baseline SSE width. With
// -ffp-contract=off (BUILD) and no reassociation the versions' own loops
// round identically; results on one machine are reproducible either way,
// but bitwise agreement across CPU models is not promised, since OpenBLAS
// and libm also choose per-CPU code.
#define CORESCAPE_TILE_FUNCTION \
  [[gnu::target_clones("avx512f", "avx2", "default")]]

CORESCAPE_TILE_FUNCTION
void ForwardQueryTile(const Buffers& b, const QueryTile& tile) {
  const AttentionTask& task = b.tasks[tile.task];
  const int d = b.shape.head_dim;
  const int rows = static_cast<int>(tile.p_end - tile.p_begin);
  const int kv_head = tile.head / b.heads_per_kv_head;
  Scratch& s = Scratch::ForThisThread(d);
  std::fill(s.acc.begin(), s.acc.begin() + int64_t{rows} * d, 0.0f);
  std::fill(s.row_max.begin(), s.row_max.end(),
            -std::numeric_limits<float>::infinity());
  std::fill(s.row_sum.begin(), s.row_sum.end(), 0.0f);
  const float* q = b.q + b.QueryOffset(task, tile.p_begin, tile.head);
  for (int64_t key_begin = 0, key_end; key_begin < tile.p_end;
       key_begin = key_end) {
    key_end = std::min(tile.p_end, b.kv_t->TileEnd(tile.task, key_begin));
    const int keys = static_cast<int>(key_end - key_begin);
    ScoreTile(b, tile.task, kv_head, q, rows, key_begin, keys,
              s.scores.data());
    for (int i = 0; i < rows; ++i) {
      float* row = s.scores.data() + i * kKeyTile;
      const int valid = CausalValid(tile.p_begin + i, key_begin, keys);
      if (valid == 0) {
        std::fill(row, row + kKeyTile, 0.0f);
        continue;
      }
      // Online softmax: rescale what was summed under the old running max.
      const float new_max = std::max(s.row_max[i], RowMax(row, valid));
      const float correction = std::exp(s.row_max[i] - new_max);
      ExpShiftedRow(row, new_max, valid);
      s.row_sum[i] = s.row_sum[i] * correction + RowSum(row);
      s.row_max[i] = new_max;
      float* acc_row = s.acc.data() + int64_t{i} * d;
      for (int c = 0; c < d; ++c) acc_row[c] *= correction;
    }
    Gemm(false, false, rows, d, keys, 1.0f, s.scores.data(), kKeyTile,
         b.v + b.KeyOffset(task, key_begin, kv_head), b.kv_stride, 1.0f,
         s.acc.data(), d);
  }
  for (int i = 0; i < rows; ++i) {
    const int64_t p = tile.p_begin + i;
    const float inverse_sum = 1.0f / s.row_sum[i];
    const float* acc_row = s.acc.data() + int64_t{i} * d;
    float* o_row = b.out_o + b.QueryOffset(task, p, tile.head);
    for (int c = 0; c < d; ++c) o_row[c] = acc_row[c] * inverse_sum;
    b.out_lse[b.RowHeadIndex(task, p, tile.head)] =
        s.row_max[i] + std::log(s.row_sum[i]);
  }
}

// D = rowsum(dO * O) for the tile's rows, then dQ = scale * dS K over all
// keys the rows see.
CORESCAPE_TILE_FUNCTION
void QueryGradTile(const Buffers& b, const QueryTile& tile) {
  const AttentionTask& task = b.tasks[tile.task];
  const int d = b.shape.head_dim;
  const int rows = static_cast<int>(tile.p_end - tile.p_begin);
  const int kv_head = tile.head / b.heads_per_kv_head;
  for (int i = 0; i < rows; ++i) {
    const int64_t p = tile.p_begin + i;
    const float* o_row = b.o + b.QueryOffset(task, p, tile.head);
    const float* d_o_row = b.d_o + b.QueryOffset(task, p, tile.head);
    double dot = 0.0;
    for (int c = 0; c < d; ++c) dot += double{o_row[c]} * d_o_row[c];
    b.delta[b.RowHeadIndex(task, p, tile.head)] = static_cast<float>(dot);
  }
  Scratch& s = Scratch::ForThisThread(d);
  std::fill(s.acc.begin(), s.acc.begin() + int64_t{rows} * d, 0.0f);
  const float* q = b.q + b.QueryOffset(task, tile.p_begin, tile.head);
  for (int64_t key_begin = 0, key_end; key_begin < tile.p_end;
       key_begin = key_end) {
    key_end = std::min(tile.p_end, b.kv_t->TileEnd(tile.task, key_begin));
    const int keys = static_cast<int>(key_end - key_begin);
    ScoreTile(b, tile.task, kv_head, q, rows, key_begin, keys,
              s.scores.data());
    ProbabilityAndGradTile(b, tile.task, tile.head, tile.p_begin, rows,
                           key_begin, keys, s.scores.data(),
                           s.grad_scores.data());
    Gemm(false, false, rows, d, keys, b.shape.softmax_scale,
         s.grad_scores.data(), kKeyTile,
         b.k + b.KeyOffset(task, key_begin, kv_head), b.kv_stride, 1.0f,
         s.acc.data(), d);
  }
  for (int i = 0; i < rows; ++i) {
    const float* acc_row = s.acc.data() + int64_t{i} * d;
    float* d_q_row = b.d_q + b.QueryOffset(task, tile.p_begin + i, tile.head);
    std::copy(acc_row, acc_row + d, d_q_row);
  }
}

// dK = scale * dS^T Q and dV = P^T dO for the tile's K/V rows, summed over
// the group's tasks (ascending), the kv head's query heads, and query tiles,
// in that fixed order, then added to d_k/d_v once.
CORESCAPE_TILE_FUNCTION
void KeyGradTile(const Buffers& b, const KvRowGroup& group,
                 const KeyTile& tile) {
  const int d = b.shape.head_dim;
  const int query_tile_rows = QueryTileRows(d);
  const int64_t tile_rows = tile.row_end - tile.row_begin;
  Scratch& s = Scratch::ForThisThread(d);
  float* d_k_acc = s.acc.data();
  float* d_v_acc = s.acc2.data();
  std::fill(d_k_acc, d_k_acc + tile_rows * d, 0.0f);
  std::fill(d_v_acc, d_v_acc + tile_rows * d, 0.0f);
  for (int64_t t : group.tasks) {
    const AttentionTask& task = b.tasks[t];
    // This task's keys within the tile: positions [key_begin, key_begin + keys).
    const int64_t first_row = std::max(tile.row_begin, task.kv_row);
    const int64_t end_row = std::min(tile.row_end, task.kv_row + task.q_end);
    if (first_row >= end_row) continue;
    const int64_t key_begin = first_row - task.kv_row;
    const int keys = static_cast<int>(end_row - first_row);
    const int64_t acc_offset = (first_row - tile.row_begin) * d;
    for (int h = 0; h < b.heads_per_kv_head; ++h) {
      const int head = tile.kv_head * b.heads_per_kv_head + h;
      // Only queries at or after the tile's first key see it.
      for (int64_t p = std::max(task.q_begin, key_begin); p < task.q_end;
           p += query_tile_rows) {
        const int rows =
            static_cast<int>(std::min<int64_t>(query_tile_rows, task.q_end - p));
        const float* q = b.q + b.QueryOffset(task, p, head);
        const float* d_o = b.d_o + b.QueryOffset(task, p, head);
        ScoreTile(b, t, tile.kv_head, q, rows, key_begin, keys,
                  s.scores.data());
        ProbabilityAndGradTile(b, t, head, p, rows, key_begin, keys,
                               s.scores.data(), s.grad_scores.data());
        Gemm(true, false, keys, d, rows, 1.0f, s.scores.data(), kKeyTile, d_o,
             b.q_stride, 1.0f, d_v_acc + acc_offset, d);
        Gemm(true, false, keys, d, rows, b.shape.softmax_scale,
             s.grad_scores.data(), kKeyTile, q, b.q_stride, 1.0f,
             d_k_acc + acc_offset, d);
      }
    }
  }
  for (int64_t r = 0; r < tile_rows; ++r) {
    const int64_t offset =
        (tile.row_begin + r) * b.kv_stride + int64_t{tile.kv_head} * d;
    for (int c = 0; c < d; ++c) {
      b.d_k[offset + c] += d_k_acc[r * d + c];
      b.d_v[offset + c] += d_v_acc[r * d + c];
    }
  }
}

// Work items cost tens of microseconds or more, so hand them out one by one.
template <typename Item, typename Fn>
void RunItems(ThreadPool* pool, const std::vector<Item>& items, Fn run_item) {
  auto run_range = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) run_item(items[i]);
  };
  ParallelForOn(pool, static_cast<int64_t>(items.size()), run_range, /*chunk_size=*/1);
}

}  // namespace

void CoreAttentionForwardCpu(const AttentionShape& shape,
                             absl::Span<const AttentionTask> tasks,
                             const float* q, const float* k, const float* v,
                             float* o, float* lse, ThreadPool* pool) {
  const std::vector<KvRowGroup> groups = GroupByKvRows(tasks);
  const TransposedKv kv_t(shape, tasks, groups, k, v, pool);
  Buffers b(shape, tasks);
  b.kv_t = &kv_t;
  b.q = q;
  b.v = v;
  b.out_o = o;
  b.out_lse = lse;
  const std::vector<QueryTile> tiles =
      PlanQueryTiles(shape, tasks, QueryTileRows(shape.head_dim));
  RunItems(pool, tiles, [&](const QueryTile& tile) { ForwardQueryTile(b, tile); });
}

void CoreAttentionBackwardCpu(const AttentionShape& shape,
                              absl::Span<const AttentionTask> tasks,
                              const float* q, const float* k, const float* v,
                              const float* o, const float* lse,
                              const float* d_o, float* d_q, float* d_k,
                              float* d_v, ThreadPool* pool) {
  if (tasks.empty()) return;
  const std::vector<KvRowGroup> groups = GroupByKvRows(tasks);
  const TransposedKv kv_t(shape, tasks, groups, k, v, pool);
  Buffers b(shape, tasks);
  b.kv_t = &kv_t;
  b.q = q;
  b.k = k;
  b.o = o;
  b.lse = lse;
  b.d_o = d_o;
  b.d_q = d_q;
  b.d_k = d_k;
  b.d_v = d_v;
  // delta is indexed like LSE, so it spans the highest query row any task uses.
  int64_t q_rows_used = 0;
  for (const AttentionTask& task : tasks) {
    q_rows_used = std::max(q_rows_used, task.q_row + task.q_end - task.q_begin);
  }
  std::vector<float> delta(q_rows_used * shape.n_heads);
  b.delta = delta.data();

  // Pass 1 writes delta, which pass 2 reads: ParallelFor returning orders them.
  const std::vector<QueryTile> query_tiles =
      PlanQueryTiles(shape, tasks, QueryTileRows(shape.head_dim));
  RunItems(pool, query_tiles,
           [&](const QueryTile& tile) { QueryGradTile(b, tile); });
  const std::vector<KeyTile> key_tiles =
      PlanKeyTiles(shape, tasks, groups, kKeyTile);
  RunItems(pool, key_tiles, [&](const KeyTile& tile) {
    KeyGradTile(b, groups[tile.group], tile);
  });
}

}  // namespace corescape::kernels::cpu
