#include "runtime/kernels/core_attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/cpu/core_attention_cpu.h"

namespace corescape::kernels {
namespace {

absl::Status TaskError(size_t index, const AttentionTask& task,
                       absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(
      "attention task ", index, " (q [", task.q_begin, ", ", task.q_end,
      "), q_row ", task.q_row, ", kv_row ", task.kv_row, "): ", problem));
}

absl::Status ValidateShape(const AttentionShape& shape) {
  if (shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.head_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention shape needs positive n_heads, n_kv_heads and head_dim, got ",
        shape.n_heads, ", ", shape.n_kv_heads, ", ", shape.head_dim));
  }
  if (shape.n_heads % shape.n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_kv_heads ", shape.n_kv_heads,
                     " does not divide n_heads ", shape.n_heads));
  }
  // Row strides are passed to BLAS as int.
  if (int64_t{shape.n_heads} * shape.head_dim > INT_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_heads * head_dim = ",
                     int64_t{shape.n_heads} * shape.head_dim, " is too large"));
  }
  if (!std::isfinite(shape.softmax_scale) || shape.softmax_scale <= 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat(
        "softmax_scale must be finite and positive, got ", shape.softmax_scale));
  }
  return absl::OkStatus();
}

absl::Status CheckPointers(absl::Span<const AttentionTask> tasks,
                           std::initializer_list<const void*> pointers) {
  if (tasks.empty()) return absl::OkStatus();
  for (const void* pointer : pointers) {
    if (pointer == nullptr) {
      return absl::InvalidArgumentError("null buffer passed to core attention");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateAttentionArgs(const AttentionShape& shape,
                                   absl::Span<const AttentionTask> tasks,
                                   int64_t q_rows, int64_t kv_rows) {
  if (absl::Status status = ValidateShape(shape); !status.ok()) return status;
  const int64_t q_row_floats = int64_t{shape.n_heads} * shape.head_dim;
  // K/V rows become a BLAS leading dimension (int) in the CPU backend.
  if (q_rows < 0 || kv_rows < 0 || kv_rows > INT_MAX ||
      q_rows > INT64_MAX / q_row_floats) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad buffer sizes: q_rows ", q_rows, ", kv_rows ", kv_rows));
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    const AttentionTask& task = tasks[i];
    if (task.q_begin < 0 || task.q_end <= task.q_begin) {
      return TaskError(i, task, "needs 0 <= q_begin < q_end");
    }
    if (task.q_row < 0 || task.q_end - task.q_begin > q_rows - task.q_row) {
      return TaskError(i, task,
                       absl::StrCat("query rows outside the ", q_rows,
                                    "-row Q/O buffers"));
    }
    if (task.kv_row < 0 || task.q_end > kv_rows - task.kv_row) {
      return TaskError(i, task,
                       absl::StrCat("key rows [kv_row, kv_row + q_end) outside "
                                    "the ", kv_rows, "-row K/V buffers"));
    }
  }
  // Each query row is written by one task only.
  std::vector<size_t> by_q_row(tasks.size());
  std::iota(by_q_row.begin(), by_q_row.end(), 0);
  std::sort(by_q_row.begin(), by_q_row.end(), [&](size_t a, size_t b) {
    return tasks[a].q_row < tasks[b].q_row;
  });
  for (size_t i = 1; i < by_q_row.size(); ++i) {
    const AttentionTask& previous = tasks[by_q_row[i - 1]];
    if (previous.q_row + (previous.q_end - previous.q_begin) >
        tasks[by_q_row[i]].q_row) {
      return TaskError(by_q_row[i], tasks[by_q_row[i]],
                       absl::StrCat("query rows overlap those of task ",
                                    by_q_row[i - 1]));
    }
  }
  return absl::OkStatus();
}

int64_t CausalPairs(const AttentionTask& task) {
  // Query p attends p + 1 keys; sum over p in [q_begin, q_end).
  return (task.q_end * (task.q_end + 1) - task.q_begin * (task.q_begin + 1)) / 2;
}

int64_t CausalPairs(absl::Span<const AttentionTask> tasks) {
  int64_t pairs = 0;
  for (const AttentionTask& task : tasks) pairs += CausalPairs(task);
  return pairs;
}

absl::Status CoreAttentionForward(const AttentionShape& shape,
                                  absl::Span<const AttentionTask> tasks,
                                  const float* q, int64_t q_rows,
                                  const float* k, const float* v,
                                  int64_t kv_rows, float* o, float* lse,
                                  ThreadPool* pool) {
  if (absl::Status status = ValidateAttentionArgs(shape, tasks, q_rows, kv_rows);
      !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckPointers(tasks, {q, k, v, o, lse});
      !status.ok()) {
    return status;
  }
  cpu::CoreAttentionForwardCpu(shape, tasks, q, k, v, o, lse, pool);
  return absl::OkStatus();
}

absl::Status CoreAttentionBackward(const AttentionShape& shape,
                                   absl::Span<const AttentionTask> tasks,
                                   const float* q, int64_t q_rows,
                                   const float* k, const float* v,
                                   int64_t kv_rows, const float* o,
                                   const float* lse, const float* d_o,
                                   float* d_q, float* d_k, float* d_v,
                                   ThreadPool* pool) {
  if (absl::Status status = ValidateAttentionArgs(shape, tasks, q_rows, kv_rows);
      !status.ok()) {
    return status;
  }
  if (absl::Status status =
          CheckPointers(tasks, {q, k, v, o, lse, d_o, d_q, d_k, d_v});
      !status.ok()) {
    return status;
  }
  cpu::CoreAttentionBackwardCpu(shape, tasks, q, k, v, o, lse, d_o, d_q, d_k,
                                d_v, pool);
  return absl::OkStatus();
}

}  // namespace corescape::kernels
