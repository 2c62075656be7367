#ifndef CORESCAPE_RUNTIME_MODEL_CORE_ATTENTION_EXECUTOR_H_
#define CORESCAPE_RUNTIME_MODEL_CORE_ATTENTION_EXECUTOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/core_attention.h"

namespace corescape::model {

// Runs a layer's core attention. The model hands over Q, K, V and the task
// list and does not care where the softmax(QKᵀ)V happens: in this process
// (LocalCoreAttention, the colocated baseline) or on attention servers.
class CoreAttentionExecutor {
 public:
  virtual ~CoreAttentionExecutor() = default;
  virtual absl::Status Forward(int layer, const kernels::AttentionShape& shape,
                               absl::Span<const kernels::AttentionTask> tasks,
                               const float* q, const float* k, const float* v,
                               int64_t rows, float* o, float* lse) = 0;
  // d_k and d_v are accumulated (the caller zeroes them).
  virtual absl::Status Backward(int layer, const kernels::AttentionShape& shape,
                                absl::Span<const kernels::AttentionTask> tasks,
                                const float* q, const float* k, const float* v,
                                const float* o, const float* lse, const float* d_o,
                                int64_t rows, float* d_q, float* d_k, float* d_v) = 0;

  // Two-phase calls for ping-pong: a micro-batch split into halves A
  // (`half` 0) and B (1) whose core attention is in flight while the other
  // half computes. Start* hands a call over and may return before its
  // outputs are written; Finish*(half) waits for them and returns the call's
  // result. Until then every buffer of the call must stay valid and
  // unchanged. At most one call per half is in flight; per half the calls
  // follow the synchronous order, and the halves alternate: A's call of a
  // layer starts, then B's (train/ping_pong_schedule.h). Each half is its
  // own micro-batch. The defaults compute in Start, so every executor runs
  // the schedule correctly; only an override (remote attention) overlaps.
  virtual absl::Status StartForward(int half, int layer, const kernels::AttentionShape& shape,
                                    absl::Span<const kernels::AttentionTask> tasks,
                                    const float* q, const float* k, const float* v,
                                    int64_t rows, float* o, float* lse) {
    return Forward(layer, shape, tasks, q, k, v, rows, o, lse);
  }
  virtual absl::Status FinishForward(int half) { return absl::OkStatus(); }
  // d_k and d_v are accumulated, as in Backward.
  virtual absl::Status StartBackward(int half, int layer, const kernels::AttentionShape& shape,
                                     absl::Span<const kernels::AttentionTask> tasks,
                                     const float* q, const float* k, const float* v,
                                     const float* o, const float* lse, const float* d_o,
                                     int64_t rows, float* d_q, float* d_k, float* d_v) {
    return Backward(layer, shape, tasks, q, k, v, o, lse, d_o, rows, d_q, d_k, d_v);
  }
  virtual absl::Status FinishBackward(int half) { return absl::OkStatus(); }
};

class LocalCoreAttention final : public CoreAttentionExecutor {
 public:
  explicit LocalCoreAttention(ThreadPool* pool) : pool_(pool) {}
  absl::Status Forward(int layer, const kernels::AttentionShape& shape,
                       absl::Span<const kernels::AttentionTask> tasks, const float* q,
                       const float* k, const float* v, int64_t rows, float* o,
                       float* lse) override {
    return kernels::CoreAttentionForward(shape, tasks, q, rows, k, v, rows, o, lse, pool_);
  }
  absl::Status Backward(int layer, const kernels::AttentionShape& shape,
                        absl::Span<const kernels::AttentionTask> tasks, const float* q,
                        const float* k, const float* v, const float* o, const float* lse,
                        const float* d_o, int64_t rows, float* d_q, float* d_k,
                        float* d_v) override {
    return kernels::CoreAttentionBackward(shape, tasks, q, rows, k, v, rows, o, lse, d_o,
                                          d_q, d_k, d_v, pool_);
  }

 private:
  ThreadPool* pool_;
};

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_CORE_ATTENTION_EXECUTOR_H_
