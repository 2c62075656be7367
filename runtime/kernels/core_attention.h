#ifndef CORESCAPE_RUNTIME_KERNELS_CORE_ATTENTION_H_
#define CORESCAPE_RUNTIME_KERNELS_CORE_ATTENTION_H_

// Core attention softmax(Q K^T * scale) V cut into token-level tasks, the unit
// that attention disaggregation ships to attention servers. Backend-neutral:
// the pointers are host memory for the CPU backend; a CUDA backend will add
// its own entry points with the same shapes and semantics.
//
// A task is one query range [q_begin, q_end) of one document. Its keys and
// values are the document prefix [0, q_end), and the mask is causal aligned at
// the bottom right: the query at document position p attends keys 0..p. Tasks
// of one call may come from many documents, and one document may be split into
// several tasks (e.g. mirrored head/tail pieces [0, a) and [L - a, L)) that
// share its K/V rows.
//
// Layouts, fp32 row-major:
//   q, o, d_o, d_q: [q_rows, n_heads, head_dim]
//   k, v, d_k, d_v: [kv_rows, n_kv_heads, head_dim]
//   lse:            [q_rows, n_heads], natural-log log-sum-exp of the scaled
//                   scores of each query row and head.
// Rows no task touches are neither read nor written.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"

namespace corescape::kernels {

struct AttentionShape {
  int n_heads = 0;
  // Grouped-query attention: query head h reads kv head
  // h / (n_heads / n_kv_heads). Must divide n_heads.
  int n_kv_heads = 0;
  int head_dim = 0;
  float softmax_scale = 0.0f;  // usually 1 / sqrt(head_dim)
};

struct AttentionTask {
  int64_t q_begin = 0;  // query positions within the document,
  int64_t q_end = 0;    // 0 <= q_begin < q_end
  int64_t q_row = 0;    // row in q/o/lse/d_o/d_q of the query at q_begin
  int64_t kv_row = 0;   // row in k/v/d_k/d_v of document position 0: keys
                        // [0, q_end) are rows kv_row .. kv_row + q_end - 1

  bool operator==(const AttentionTask&) const = default;
};

// Writes o and lse for every task's query rows. Query rows of different
// tasks must not overlap; K/V rows may. pool may be null (runs on the
// caller's thread). Returns InvalidArgument for bad shapes or tasks outside
// the buffers, and touches nothing then.
absl::Status CoreAttentionForward(const AttentionShape& shape,
                                  absl::Span<const AttentionTask> tasks,
                                  const float* q, int64_t q_rows,
                                  const float* k, const float* v,
                                  int64_t kv_rows, float* o, float* lse,
                                  ThreadPool* pool);

// Gradients of the forward pass given its o and lse and the output gradient
// d_o. d_q is OVERWRITTEN for the task rows. d_k and d_v are ACCUMULATED
// (+=): the pieces of one document (and the query heads of one GQA group)
// all contribute to the same K/V rows, so the caller zeroes d_k and d_v
// first (or deliberately accumulates across calls). On a given machine the
// results are bitwise identical whatever the pool's thread count and
// scheduling, so data-parallel replicas agree exactly.
absl::Status CoreAttentionBackward(const AttentionShape& shape,
                                   absl::Span<const AttentionTask> tasks,
                                   const float* q, int64_t q_rows,
                                   const float* k, const float* v,
                                   int64_t kv_rows, const float* o,
                                   const float* lse, const float* d_o,
                                   float* d_q, float* d_k, float* d_v,
                                   ThreadPool* pool);

// Checks shape and tasks against buffers of q_rows and kv_rows rows: positive
// sizes, n_kv_heads dividing n_heads, a finite positive scale, every task's
// rows inside the buffers, and no two tasks sharing a query row.
absl::Status ValidateAttentionArgs(const AttentionShape& shape,
                                   absl::Span<const AttentionTask> tasks,
                                   int64_t q_rows, int64_t kv_rows);

// Causal (query, key) pairs of a task, summed over tasks: the work measure
// used for FLOP counts and load balancing.
int64_t CausalPairs(const AttentionTask& task);
int64_t CausalPairs(absl::Span<const AttentionTask> tasks);

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CORE_ATTENTION_H_
