#ifndef CORESCAPE_RUNTIME_TRAIN_PING_PONG_SCHEDULE_H_
#define CORESCAPE_RUNTIME_TRAIN_PING_PONG_SCHEDULE_H_

#include <array>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/model/core_attention_executor.h"
#include "runtime/model/transformer.h"

namespace corescape::train {

// The two halves of a micro-batch of at least two rows: A takes packed rows
// [0, k), B rows [k, B), with their tasks (row numbers shifted for B). k in
// [1, B-1] minimises the larger half's estimated forward cost
//
//   rows·seq_len·dense_flops_per_token + causal_pairs·attention_flops_per_pair
//
// (dense: 2 FLOPs per weight of a layer's QKV, output and SwiGLU projections;
// attention: 4·n_heads·head_dim per (query, key) pair of the half's tasks'
// own query ranges), with ties going to ceil(B/2): a half of long documents
// then gets fewer rows, so neither half's core attention outlasts the other
// half's compute it is meant to hide behind. Whole rows, so every document
// piece stays in one half; a task reaching into both halves is
// InvalidArgument.
absl::StatusOr<std::array<model::ModelBatch, 2>> SplitIntoHalves(const model::ModelBatch& batch,
                                                                 const model::ModelConfig& shape);

// Rows [0, rows_a) and [rows_a, B) with their tasks, as above;
// InvalidArgument unless 1 <= rows_a < B and no task spans the cut.
absl::StatusOr<std::array<model::ModelBatch, 2>> SplitAtRow(const model::ModelBatch& batch,
                                                            int rows_a);

// The estimate SplitIntoHalves balances, for a whole micro-batch or a half:
// rows·seq_len·dense FLOPs per token + causal pairs·FLOPs per pair (forward).
int64_t EstimatedForwardFlops(const model::ModelBatch& batch, const model::ModelConfig& shape);

// Ping-pong (DistCA): a micro-batch runs as two halves so that one half's
// core attention — its transfers and the remote computation — overlaps the
// other half's dense compute. Forward:
//
//   Embed(A) Pre(A,0) start(A,0) Embed(B)
//   for l: Pre(B,l) start(B,l) finish(A,l) Post(A,l)
//          (l+1 < L ? Pre(A,l+1) start(A,l+1) : Head(A)) finish(B,l) Post(B,l)
//   Head(B)
//
// and backward mirrors it from the last layer down. Each half
// is its own micro-batch for the executor (model/core_attention_executor.h:
// Start*/Finish*), so with remote attention every exchange of a half is in
// flight while the other half computes. The loss is the sum of the halves'
// and the gradients are accumulated with the caller's grad_scale, so the
// result equals Transformer::Forward/Backward of the whole micro-batch
// within fp32 rounding.
class PingPongSchedule {
 public:
  explicit PingPongSchedule(model::Transformer& model) : model_(model) {}

  // Whether `batch` can be split: at least two rows. Otherwise run it
  // through Transformer::Forward/Backward as usual.
  static bool Splits(const model::ModelBatch& batch) { return batch.batch_size >= 2; }

  // The halves Forward runs `batch` as: SplitIntoHalves with this model's
  // shape.
  absl::StatusOr<std::array<model::ModelBatch, 2>> Split(const model::ModelBatch& batch) const {
    return SplitIntoHalves(batch, model_.config());
  }

  // Forward of both halves of `batch`; loss summed over both.
  absl::StatusOr<model::LossResult> Forward(const model::ModelBatch& batch,
                                            model::CoreAttentionExecutor& attention);
  // Backward of the last Forward; gradients ACCUMULATED, the loss gradient
  // scaled by grad_scale (as Transformer::Backward).
  absl::Status Backward(model::CoreAttentionExecutor& attention, float grad_scale);

 private:
  static constexpr int kA = 0;
  static constexpr int kB = 1;

  model::Transformer& model_;
  std::array<model::Activations, 2> halves_;  // [kA], [kB]
};

}  // namespace corescape::train

#endif  // CORESCAPE_RUNTIME_TRAIN_PING_PONG_SCHEDULE_H_
