#ifndef CORESCAPE_RUNTIME_TRAIN_ATTENTION_FAILURE_H_
#define CORESCAPE_RUNTIME_TRAIN_ATTENTION_FAILURE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/model/core_attention_executor.h"

namespace corescape::train {

// A training step (or validation) that every rank dropped because core
// attention failed on at least one of them: no update, the loader rewound.
// Calling Step() (Validate()) again, after DataParallelTrainer::SetAttention
// if the executor must change, gives the result the dropped one would have.
absl::Status AttentionDiscardedError(absl::string_view what);
bool IsDiscardedForAttention(const absl::Status& status);

// Passes core attention through to `inner` and remembers its first error, so
// the trainer can tell a failed exchange (remote attention: a server died)
// from the model's own errors.
class FailureRecordingAttention final : public model::CoreAttentionExecutor {
 public:
  explicit FailureRecordingAttention(model::CoreAttentionExecutor* inner) : inner_(inner) {}

  absl::Status Forward(const model::AttentionForwardCall& call) override {
    return Record(inner_->Forward(call));
  }
  absl::Status Backward(const model::AttentionBackwardCall& call) override {
    return Record(inner_->Backward(call));
  }
  absl::Status StartForward(int half, const model::AttentionForwardCall& call) override {
    return Record(inner_->StartForward(half, call));
  }
  absl::Status FinishForward(int half) override { return Record(inner_->FinishForward(half)); }
  absl::Status StartBackward(int half, const model::AttentionBackwardCall& call) override {
    return Record(inner_->StartBackward(half, call));
  }
  absl::Status FinishBackward(int half) override { return Record(inner_->FinishBackward(half)); }

  bool failed() const { return !error_.ok(); }
  const absl::Status& error() const { return error_; }

 private:
  absl::Status Record(absl::Status status) {
    if (!status.ok() && error_.ok()) error_ = status;
    return status;
  }

  model::CoreAttentionExecutor* inner_;
  absl::Status error_;
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_ATTENTION_FAILURE_H_
