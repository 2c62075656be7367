#ifndef CORESCAPE_RUNTIME_ATTENTION_IN_PLACE_FUSED_BATCH_H_
#define CORESCAPE_RUNTIME_ATTENTION_IN_PLACE_FUSED_BATCH_H_

// What one worker computes in in-place mode: its ServerBatch of the
// micro-batch's plan (the tasks it keeps at home plus those other workers
// ship to it) as ONE fused kernel call per layer and pass. Each source
// worker's part is a contiguous run of Q rows and of K/V rows (WorkerShare),
// so a source's request is copied into place, and its reply out, with a few
// memcpys. The request and reply layouts are wire_format.h's (the source may
// be this worker itself: its "request" then never leaves the process). Knows
// nothing of communication.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/attention/micro_batch_plan.h"
#include "runtime/base/thread_pool.h"
#include "runtime/kernels/core_attention.h"

namespace corescape::attention {

class InPlaceFusedBatch {
 public:
  // `self`: this worker's rank = its server index in the plan. `pool` may be
  // null (the kernel runs on the caller's thread).
  InPlaceFusedBatch(int32_t self, ThreadPool* pool) : self_(self), pool_(pool) {}

  // A new micro-batch. `plan` must outlive every later call until the next
  // Begin. keep_forward_tensors: hold each layer's Q/K/V/O/LSE from its
  // forward until its backward; false: one set, refilled from each backward
  // request (which then carries them).
  void Begin(const MicroBatchPlan* plan, int n_layers, bool keep_forward_tensors);

  // Forward of `layer`: Prepare, Take every source's request (Q | K | V rows
  // of its share), Run, Put every source's reply (O | LSE rows).
  void PrepareForward(int layer, const RowWidths& widths);
  void TakeForwardRequest(int layer, int32_t source, const RowWidths& widths, const float* in);
  absl::Status RunForward(int layer, const kernels::AttentionShape& shape);
  void PutForwardReply(int layer, int32_t source, const RowWidths& widths, float* out) const;

  // Backward of `layer`: requests are dO [| Q | K | V | O | LSE when
  // `carries`]; replies dQ | dK | dV, where a K/V prefix shared by several
  // tasks here carries their gradients summed. Without `carries` the layer's
  // forward tensors must have been kept (FailedPrecondition otherwise).
  absl::Status PrepareBackward(int layer, const RowWidths& widths, bool carries);
  void TakeBackwardRequest(int layer, int32_t source, const RowWidths& widths, bool carries,
                           const float* in);
  absl::Status RunBackward(int layer, const kernels::AttentionShape& shape);
  void PutBackwardReply(int32_t source, const RowWidths& widths, float* out) const;

  // Kernel tasks of the current micro-batch's fused call.
  int64_t num_tasks() const { return static_cast<int64_t>(tasks_.size()); }

 private:
  struct ForwardTensors {
    std::vector<float> q, k, v, o, lse;
  };
  ForwardTensors& Layer(int layer) { return layers_[keep_ ? layer : 0]; }
  const ForwardTensors& Layer(int layer) const { return layers_[keep_ ? layer : 0]; }
  const WorkerShare& Share(int32_t source) const { return plan_->shares[self_][source]; }
  void ResizeForward(ForwardTensors& t, const RowWidths& widths);

  const int32_t self_;
  ThreadPool* const pool_;
  const MicroBatchPlan* plan_ = nullptr;
  bool keep_ = true;
  std::vector<kernels::AttentionTask> tasks_;
  // Reused across micro-batches (resized, never shrunk below use).
  std::vector<ForwardTensors> layers_;
  std::vector<float> d_o_, d_q_, d_k_, d_v_;
};

}  // namespace corescape::attention

#endif  // CORESCAPE_RUNTIME_ATTENTION_IN_PLACE_FUSED_BATCH_H_
