#ifndef CORESCAPE_RUNTIME_MODEL_CORE_ATTENTION_EXECUTOR_H_
#define CORESCAPE_RUNTIME_MODEL_CORE_ATTENTION_EXECUTOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/core_attention.h"

namespace corescape::model {

// What both passes of one layer's core attention over a micro-batch read:
// `rows` rows of row-major Q (width n_heads·head_dim), K and V (width
// n_kv_heads·head_dim), and the tasks over them. Rows outside every task
// (padding) are left alone.
struct AttentionInputs {
  int layer = 0;
  kernels::AttentionShape shape;
  absl::Span<const kernels::AttentionTask> tasks;
  int64_t rows = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
};

struct AttentionForwardCall {
  AttentionInputs in;
  float* o = nullptr;    // out: rows × n_heads·head_dim
  float* lse = nullptr;  // out: rows × n_heads
};

// The backward of an AttentionForwardCall over the same inputs: its
// outputs and dO in, dQ out; dK and dV are accumulated (the caller zeroes
// them).
struct AttentionBackwardCall {
  AttentionInputs in;
  const float* o = nullptr;
  const float* lse = nullptr;
  const float* d_o = nullptr;
  float* d_q = nullptr;
  float* d_k = nullptr;  // accumulated
  float* d_v = nullptr;  // accumulated
};

// Runs a layer's core attention. The model hands over Q, K, V and the task
// list and does not care where the softmax(QKᵀ)V happens: in this process
// (LocalCoreAttention, the colocated baseline) or on attention servers.
class CoreAttentionExecutor {
 public:
  virtual ~CoreAttentionExecutor() = default;
  virtual absl::Status Forward(const AttentionForwardCall& call) = 0;
  virtual absl::Status Backward(const AttentionBackwardCall& call) = 0;

  // Two-phase calls for ping-pong: a micro-batch split into halves A
  // (`half` 0) and B (1) whose core attention is in flight while the other
  // half computes. Start* hands a call over and may return before its
  // outputs are written; Finish*(half) waits for them and returns the call's
  // result. Until then every buffer the call points at (not the call struct
  // itself) must stay valid and unchanged. At most one call per half is in
  // flight; per half the calls follow the synchronous order, and the halves
  // alternate: A's call of a layer starts, then B's
  // (train/ping_pong_schedule.h). Each half is its own micro-batch. The
  // defaults compute in Start, so every executor runs the schedule
  // correctly; only an override (remote attention) overlaps.
  virtual absl::Status StartForward(int half, const AttentionForwardCall& call) {
    return Forward(call);
  }
  virtual absl::Status FinishForward(int half) { return absl::OkStatus(); }
  virtual absl::Status StartBackward(int half, const AttentionBackwardCall& call) {
    return Backward(call);
  }
  virtual absl::Status FinishBackward(int half) { return absl::OkStatus(); }
};

class LocalCoreAttention final : public CoreAttentionExecutor {
 public:
  explicit LocalCoreAttention(ThreadPool* pool) : pool_(pool) {}
  absl::Status Forward(const AttentionForwardCall& c) override {
    const AttentionInputs& in = c.in;
    return kernels::CoreAttentionForward(in.shape, in.tasks, in.q, in.rows, in.k, in.v, in.rows,
                                         c.o, c.lse, pool_);
  }
  absl::Status Backward(const AttentionBackwardCall& c) override {
    const AttentionInputs& in = c.in;
    return kernels::CoreAttentionBackward(in.shape, in.tasks, in.q, in.rows, in.k, in.v, in.rows,
                                          c.o, c.lse, c.d_o, c.d_q, c.d_k, c.d_v, pool_);
  }

 private:
  ThreadPool* pool_;
};

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_CORE_ATTENTION_EXECUTOR_H_
