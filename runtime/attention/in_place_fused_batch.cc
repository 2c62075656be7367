#include "runtime/attention/in_place_fused_batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace corescape::attention {

void InPlaceFusedBatch::Begin(const MicroBatchPlan* plan, int n_layers, bool keep_forward_tensors) {
  plan_ = plan;
  keep_ = keep_forward_tensors;
  tasks_ = KernelTasks(plan_->batches[self_]);
  layers_.resize(keep_ ? std::max(n_layers, 1) : 1);
}

void InPlaceFusedBatch::ResizeForward(ForwardTensors& t, const RowWidths& widths) {
  const planner::ServerBatch& batch = plan_->batches[self_];
  t.q.resize(batch.q_rows * widths.q);
  t.k.resize(batch.kv_rows * widths.kv);
  t.v.resize(batch.kv_rows * widths.kv);
  t.o.resize(batch.q_rows * widths.q);
  t.lse.resize(batch.q_rows * widths.lse);
}

void InPlaceFusedBatch::PrepareForward(int layer, const RowWidths& widths) {
  ResizeForward(Layer(layer), widths);
}

void InPlaceFusedBatch::TakeForwardRequest(int layer, int32_t source, const RowWidths& widths,
                                           const float* in) {
  const WorkerShare& s = Share(source);
  ForwardTensors& t = Layer(layer);
  TakeFloats(in, t.q.data() + s.q_row * widths.q, s.q_rows * widths.q);
  TakeFloats(in, t.k.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
  TakeFloats(in, t.v.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
}

absl::Status InPlaceFusedBatch::RunForward(int layer, const kernels::AttentionShape& shape) {
  if (tasks_.empty()) return absl::OkStatus();
  const planner::ServerBatch& batch = plan_->batches[self_];
  ForwardTensors& t = Layer(layer);
  return kernels::CoreAttentionForward(shape, tasks_, t.q.data(), batch.q_rows, t.k.data(),
                                       t.v.data(), batch.kv_rows, t.o.data(), t.lse.data(), pool_);
}

void InPlaceFusedBatch::PutForwardReply(int layer, int32_t source, const RowWidths& widths,
                                        float* out) const {
  const WorkerShare& s = Share(source);
  const ForwardTensors& t = Layer(layer);
  PutFloats(out, t.o.data() + s.q_row * widths.q, s.q_rows * widths.q);
  PutFloats(out, t.lse.data() + s.q_row * widths.lse, s.q_rows * widths.lse);
}

absl::Status InPlaceFusedBatch::PrepareBackward(int layer, const RowWidths& widths, bool carries) {
  const planner::ServerBatch& batch = plan_->batches[self_];
  ForwardTensors& t = Layer(layer);
  if (carries) {
    ResizeForward(t, widths);
  } else if (!keep_ || t.q.size() != static_cast<size_t>(batch.q_rows * widths.q) ||
             t.k.size() != static_cast<size_t>(batch.kv_rows * widths.kv) ||
             t.lse.size() != static_cast<size_t>(batch.q_rows * widths.lse)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "in-place attention: no kept forward tensors of layer ", layer, " match this micro-batch (",
        batch.q_rows, " query rows, ", batch.kv_rows, " key rows)"));
  }
  d_o_.resize(batch.q_rows * widths.q);
  d_q_.resize(batch.q_rows * widths.q);
  d_k_.assign(batch.kv_rows * widths.kv, 0.0f);  // the kernel accumulates
  d_v_.assign(batch.kv_rows * widths.kv, 0.0f);
  return absl::OkStatus();
}

void InPlaceFusedBatch::TakeBackwardRequest(int layer, int32_t source, const RowWidths& widths,
                                            bool carries, const float* in) {
  const WorkerShare& s = Share(source);
  TakeFloats(in, d_o_.data() + s.q_row * widths.q, s.q_rows * widths.q);
  if (!carries) return;
  ForwardTensors& t = Layer(layer);
  TakeFloats(in, t.q.data() + s.q_row * widths.q, s.q_rows * widths.q);
  TakeFloats(in, t.k.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
  TakeFloats(in, t.v.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
  TakeFloats(in, t.o.data() + s.q_row * widths.q, s.q_rows * widths.q);
  TakeFloats(in, t.lse.data() + s.q_row * widths.lse, s.q_rows * widths.lse);
}

absl::Status InPlaceFusedBatch::RunBackward(int layer, const kernels::AttentionShape& shape) {
  if (tasks_.empty()) return absl::OkStatus();
  const planner::ServerBatch& batch = plan_->batches[self_];
  ForwardTensors& t = Layer(layer);
  return kernels::CoreAttentionBackward(shape, tasks_, t.q.data(), batch.q_rows, t.k.data(),
                                        t.v.data(), batch.kv_rows, t.o.data(), t.lse.data(),
                                        d_o_.data(), d_q_.data(), d_k_.data(), d_v_.data(), pool_);
}

void InPlaceFusedBatch::PutBackwardReply(int32_t source, const RowWidths& widths,
                                         float* out) const {
  const WorkerShare& s = Share(source);
  PutFloats(out, d_q_.data() + s.q_row * widths.q, s.q_rows * widths.q);
  PutFloats(out, d_k_.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
  PutFloats(out, d_v_.data() + s.kv_row * widths.kv, s.kv_rows * widths.kv);
}

}  // namespace corescape::attention
