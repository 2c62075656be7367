#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_CORE_ATTENTION_REFERENCE_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_CORE_ATTENTION_REFERENCE_H_

// Naive core attention for tests and benchmarks: per task, head and query it
// materialises the full score row in double precision and applies the
// textbook formulas. Same arguments, layouts and semantics (including d_k/d_v
// accumulation) as CoreAttentionForward/Backward; single-threaded and slow.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/kernels/core_attention.h"

namespace corescape::kernels {

absl::Status ReferenceAttentionForward(const AttentionShape& shape,
                                       absl::Span<const AttentionTask> tasks,
                                       const float* q, int64_t q_rows,
                                       const float* k, const float* v,
                                       int64_t kv_rows, float* o, float* lse);

// Uses D_i = sum_j P_ij dP_ij from its own probabilities, so it does not read
// o or lse: a check on the kernel's use of them.
absl::Status ReferenceAttentionBackward(const AttentionShape& shape,
                                        absl::Span<const AttentionTask> tasks,
                                        const float* q, int64_t q_rows,
                                        const float* k, const float* v,
                                        int64_t kv_rows, const float* d_o,
                                        float* d_q, float* d_k, float* d_v);

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_CORE_ATTENTION_REFERENCE_H_
