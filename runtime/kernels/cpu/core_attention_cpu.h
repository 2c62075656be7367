#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_CORE_ATTENTION_CPU_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_CORE_ATTENTION_CPU_H_

// CPU backend of runtime/kernels/core_attention.h: blocked online-softmax
// (FlashAttention-2 style) forward and backward over fp32 host buffers.
// Memory is linear in tokens; no score matrix larger than one tile exists.
// Callers go through CoreAttentionForward/Backward, which validate first;
// these assume valid arguments.

#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/core_attention.h"

namespace corescape::kernels::cpu {

void CoreAttentionForwardCpu(const AttentionShape& shape,
                             absl::Span<const AttentionTask> tasks,
                             const float* q, const float* k, const float* v,
                             float* o, float* lse, ThreadPool* pool);

// Two passes, each item owning its outputs: query tiles write dQ (and the
// per-row D = rowsum(dO * O)), then key tiles sum every contribution to their
// dK/dV rows in a fixed order and add it once. Probabilities are recomputed
// from LSE in both. d_k and d_v are accumulated (+=).
void CoreAttentionBackwardCpu(const AttentionShape& shape,
                              absl::Span<const AttentionTask> tasks,
                              const float* q, const float* k, const float* v,
                              const float* o, const float* lse,
                              const float* d_o, float* d_q, float* d_k,
                              float* d_v, ThreadPool* pool);

}  // namespace corescape::kernels::cpu

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_CORE_ATTENTION_CPU_H_
