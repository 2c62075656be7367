#ifndef CORESCAPE_WORKER_ATTENTION_FORWARDER_H_
#define CORESCAPE_WORKER_ATTENTION_FORWARDER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/job_runner.h"

namespace corescape::worker {

// An AbortableAttention that passes every call — including the ping-pong
// Start/Finish forms, so both halves' exchanges can be in flight — to
// `Inner`: a concrete executor (the runtime's disaggregated or in-place
// one, which has Abort but is not an AbortableAttention) or another
// AbortableAttention being decorated (decorators derive and override what
// they add). Speed weights and the scheduler's plans reach the inner
// executor if it takes them.
template <typename Inner>
class AttentionForwarder : public AbortableAttention {
 public:
  explicit AttentionForwarder(std::shared_ptr<Inner> inner) : inner_(std::move(inner)) {}

  absl::Status Forward(int layer, const kernels::AttentionShape& shape,
                       absl::Span<const kernels::AttentionTask> tasks, const float* q,
                       const float* k, const float* v, int64_t rows, float* o,
                       float* lse) override {
    return inner_->Forward(layer, shape, tasks, q, k, v, rows, o, lse);
  }
  absl::Status Backward(int layer, const kernels::AttentionShape& shape,
                        absl::Span<const kernels::AttentionTask> tasks, const float* q,
                        const float* k, const float* v, const float* o, const float* lse,
                        const float* d_o, int64_t rows, float* d_q, float* d_k,
                        float* d_v) override {
    return inner_->Backward(layer, shape, tasks, q, k, v, o, lse, d_o, rows, d_q, d_k, d_v);
  }
  absl::Status StartForward(int half, int layer, const kernels::AttentionShape& shape,
                            absl::Span<const kernels::AttentionTask> tasks, const float* q,
                            const float* k, const float* v, int64_t rows, float* o,
                            float* lse) override {
    return inner_->StartForward(half, layer, shape, tasks, q, k, v, rows, o, lse);
  }
  absl::Status FinishForward(int half) override { return inner_->FinishForward(half); }
  absl::Status StartBackward(int half, int layer, const kernels::AttentionShape& shape,
                             absl::Span<const kernels::AttentionTask> tasks, const float* q,
                             const float* k, const float* v, const float* o, const float* lse,
                             const float* d_o, int64_t rows, float* d_q, float* d_k,
                             float* d_v) override {
    return inner_->StartBackward(half, layer, shape, tasks, q, k, v, o, lse, d_o, rows, d_q, d_k,
                                 d_v);
  }
  absl::Status FinishBackward(int half) override { return inner_->FinishBackward(half); }
  void Abort(const std::string& reason) override { inner_->Abort(reason); }
  absl::Status SetSpeedWeights(uint64_t version, const std::vector<double>& weights) override {
    if constexpr (requires(Inner& inner) { inner.SetSpeedWeights(version, weights); }) {
      return inner_->SetSpeedWeights(version, weights);
    } else {
      return AbortableAttention::SetSpeedWeights(version, weights);
    }
  }
  void ShipSchedulerPlans(bool on) override {
    if constexpr (requires(Inner& inner) { inner.ShipSchedulerPlans(on); }) {
      inner_->ShipSchedulerPlans(on);
    }
  }
  absl::Status OfferShippedPlan(attention::ShippedPlan plan) override {
    if constexpr (requires(Inner& inner) { inner.OfferShippedPlan(std::move(plan)); }) {
      return inner_->OfferShippedPlan(std::move(plan));
    } else {
      return AbortableAttention::OfferShippedPlan(std::move(plan));
    }
  }

 private:
  const std::shared_ptr<Inner> inner_;
};

}  // namespace corescape::worker

#endif  // CORESCAPE_WORKER_ATTENTION_FORWARDER_H_
