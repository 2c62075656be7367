#include "runtime/train/ping_pong_schedule.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/planner/causal_pairs.h"

namespace corescape::train {
namespace {

// `first`..`last` (exclusive) of a vector of B*T entries.
std::vector<int32_t> Rows(const std::vector<int32_t>& values, int64_t first, int64_t last) {
  return std::vector<int32_t>(values.begin() + first, values.begin() + last);
}

// Forward FLOPs per token of one layer's dense part: 2 per weight of the
// QKV, output and SwiGLU (gate, up, down) projections.
int64_t DenseFlopsPerToken(const model::ModelConfig& shape) {
  const int64_t d = shape.d_model;
  const int64_t head_dim = shape.head_dim();
  const int64_t weights = d * (shape.n_heads + 2 * shape.n_kv_heads) * head_dim +
                          int64_t{shape.n_heads} * head_dim * d + 3 * d * shape.d_ff;
  return 2 * weights;
}

// Forward FLOPs per causal (query, key) pair: QKᵀ and PV, 2 each per head
// dimension of every head.
int64_t AttentionFlopsPerPair(const model::ModelConfig& shape) {
  return 4 * int64_t{shape.n_heads} * shape.head_dim();
}

// Causal pairs of the tasks whose queries start in each row.
std::vector<int64_t> PairsPerRow(const model::ModelBatch& batch) {
  std::vector<int64_t> pairs(batch.batch_size, 0);
  for (const kernels::AttentionTask& task : batch.attention_tasks) {
    const int64_t row = task.q_row / batch.seq_len;
    if (row >= 0 && row < batch.batch_size) {
      pairs[row] += planner::CausalPairs(task.q_begin, task.q_end);
    }
  }
  return pairs;
}

// The k in [1, B-1] whose halves, rows [0, k) and [k, B), have the smallest
// larger estimated cost (dense per token plus core attention per pair), so
// that either half's remote attention fits behind the other's compute. Ties
// go to the k nearest ceil(B/2), then the smaller.
int CheapestSplitRow(const model::ModelBatch& batch, const model::ModelConfig& shape) {
  const int64_t row_flops = int64_t{batch.seq_len} * DenseFlopsPerToken(shape);
  const int64_t pair_flops = AttentionFlopsPerPair(shape);
  const std::vector<int64_t> pairs = PairsPerRow(batch);
  int64_t total_pairs = 0;
  for (int64_t p : pairs) total_pairs += p;
  const int middle = (batch.batch_size + 1) / 2;
  int best = middle;
  int64_t best_cost = std::numeric_limits<int64_t>::max();
  int64_t pairs_a = 0;
  for (int k = 1; k < batch.batch_size; ++k) {
    pairs_a += pairs[k - 1];
    const int64_t cost_a = k * row_flops + pairs_a * pair_flops;
    const int64_t cost_b = (batch.batch_size - k) * row_flops + (total_pairs - pairs_a) * pair_flops;
    const int64_t cost = std::max(cost_a, cost_b);
    if (cost < best_cost ||
        (cost == best_cost && std::abs(k - middle) < std::abs(best - middle))) {
      best = k;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<std::array<model::ModelBatch, 2>> SplitIntoHalves(const model::ModelBatch& batch,
                                                                 const model::ModelConfig& shape) {
  if (batch.batch_size < 2 || batch.seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ping-pong needs at least two rows to split, the micro-batch has ", batch.batch_size));
  }
  return SplitAtRow(batch, CheapestSplitRow(batch, shape));
}

int64_t EstimatedForwardFlops(const model::ModelBatch& batch, const model::ModelConfig& shape) {
  int64_t pairs = 0;
  for (int64_t p : PairsPerRow(batch)) pairs += p;
  return batch.rows() * DenseFlopsPerToken(shape) + pairs * AttentionFlopsPerPair(shape);
}

absl::StatusOr<std::array<model::ModelBatch, 2>> SplitAtRow(const model::ModelBatch& batch,
                                                            int rows_a) {
  if (batch.batch_size < 2 || batch.seq_len < 1 || rows_a < 1 || rows_a >= batch.batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("cannot split a micro-batch of ",
                                                   batch.batch_size, " rows after row ", rows_a));
  }
  const int64_t rows = batch.rows();
  if (static_cast<int64_t>(batch.tokens.size()) != rows ||
      static_cast<int64_t>(batch.targets.size()) != rows ||
      static_cast<int64_t>(batch.positions.size()) != rows) {
    return absl::InvalidArgumentError("batch: tokens, targets and positions must have B*T entries");
  }
  const int64_t split = int64_t{rows_a} * batch.seq_len;  // B's first token row
  std::array<model::ModelBatch, 2> halves;
  halves[0].batch_size = rows_a;
  halves[1].batch_size = batch.batch_size - rows_a;
  const int64_t bounds[3] = {0, split, rows};
  for (int h = 0; h < 2; ++h) {
    model::ModelBatch& half = halves[h];
    half.seq_len = batch.seq_len;
    half.tokens = Rows(batch.tokens, bounds[h], bounds[h + 1]);
    half.targets = Rows(batch.targets, bounds[h], bounds[h + 1]);
    half.positions = Rows(batch.positions, bounds[h], bounds[h + 1]);
  }
  for (size_t i = 0; i < batch.attention_tasks.size(); ++i) {
    kernels::AttentionTask task = batch.attention_tasks[i];
    const int64_t q_last = task.q_row + (task.q_end - task.q_begin);  // exclusive
    const int64_t kv_last = task.kv_row + task.q_end;
    const bool in_a = q_last <= split && kv_last <= split;
    const bool in_b = task.q_row >= split && task.kv_row >= split;
    if (in_a == in_b) {
      return absl::InvalidArgumentError(absl::StrCat(
          "attention task ", i, " (rows ", std::min(task.q_row, task.kv_row), "..",
          std::max(q_last, kv_last), ") reaches into both halves of the micro-batch (split at row ",
          split, ")"));
    }
    if (in_b) {
      task.q_row -= split;
      task.kv_row -= split;
    }
    halves[in_a ? 0 : 1].attention_tasks.push_back(task);
  }
  return halves;
}

absl::StatusOr<model::LossResult> PingPongSchedule::Forward(
    const model::ModelBatch& batch, model::CoreAttentionExecutor& attention) {
  if (absl::Status s = model_.ValidateBatch(batch); !s.ok()) return s;
  auto halves = Split(batch);
  if (!halves.ok()) return halves.status();
  model::Activations& a = halves_[kA];
  model::Activations& b = halves_[kB];
  a.batch = std::move((*halves)[kA]);
  b.batch = std::move((*halves)[kB]);
  const int layers = model_.config().n_layers;

  CORESCAPE_RETURN_IF_ERROR(model_.EmbedForward(a));
  CORESCAPE_RETURN_IF_ERROR(model_.PreAttentionForward(0, a));
  CORESCAPE_RETURN_IF_ERROR(model_.StartCoreAttentionForward(0, kA, attention, a));
  CORESCAPE_RETURN_IF_ERROR(model_.EmbedForward(b));
  model::LossResult loss_a;
  for (int l = 0; l < layers; ++l) {
    CORESCAPE_RETURN_IF_ERROR(model_.PreAttentionForward(l, b));
    CORESCAPE_RETURN_IF_ERROR(model_.StartCoreAttentionForward(l, kB, attention, b));
    CORESCAPE_RETURN_IF_ERROR(attention.FinishForward(kA));
    CORESCAPE_RETURN_IF_ERROR(model_.PostAttentionForward(l, a));
    if (l + 1 < layers) {
      CORESCAPE_RETURN_IF_ERROR(model_.PreAttentionForward(l + 1, a));
      CORESCAPE_RETURN_IF_ERROR(model_.StartCoreAttentionForward(l + 1, kA, attention, a));
    } else {
      auto head = model_.HeadForward(a);  // while B's last attention is out
      if (!head.ok()) return head.status();
      loss_a = *head;
    }
    CORESCAPE_RETURN_IF_ERROR(attention.FinishForward(kB));
    CORESCAPE_RETURN_IF_ERROR(model_.PostAttentionForward(l, b));
  }
  auto head_b = model_.HeadForward(b);
  if (!head_b.ok()) return head_b.status();
  const model::LossResult loss_b = *head_b;
  return model::LossResult{loss_a.loss_sum + loss_b.loss_sum, loss_a.tokens + loss_b.tokens};
}

absl::Status PingPongSchedule::Backward(model::CoreAttentionExecutor& attention,
                                        float grad_scale) {
  model::Activations& a = halves_[kA];
  model::Activations& b = halves_[kB];
  const int layers = model_.config().n_layers;
  if (a.layers.size() != static_cast<size_t>(layers) ||
      b.layers.size() != static_cast<size_t>(layers)) {
    return absl::FailedPreconditionError("ping-pong backward without a forward");
  }

  CORESCAPE_RETURN_IF_ERROR(model_.HeadBackward(a, grad_scale));
  CORESCAPE_RETURN_IF_ERROR(model_.PostAttentionBackward(layers - 1, a));
  CORESCAPE_RETURN_IF_ERROR(model_.StartCoreAttentionBackward(layers - 1, kA, attention, a));
  CORESCAPE_RETURN_IF_ERROR(model_.HeadBackward(b, grad_scale));
  for (int l = layers - 1; l >= 0; --l) {
    CORESCAPE_RETURN_IF_ERROR(model_.PostAttentionBackward(l, b));
    CORESCAPE_RETURN_IF_ERROR(model_.StartCoreAttentionBackward(l, kB, attention, b));
    CORESCAPE_RETURN_IF_ERROR(attention.FinishBackward(kA));
    CORESCAPE_RETURN_IF_ERROR(model_.PreAttentionBackward(l, a));
    if (l > 0) {
      CORESCAPE_RETURN_IF_ERROR(model_.PostAttentionBackward(l - 1, a));
      CORESCAPE_RETURN_IF_ERROR(model_.StartCoreAttentionBackward(l - 1, kA, attention, a));
    } else {
      CORESCAPE_RETURN_IF_ERROR(model_.EmbedBackward(a));  // while B's last attention is out
    }
    CORESCAPE_RETURN_IF_ERROR(attention.FinishBackward(kB));
    CORESCAPE_RETURN_IF_ERROR(model_.PreAttentionBackward(l, b));
  }
  CORESCAPE_RETURN_IF_ERROR(model_.EmbedBackward(b));
  return absl::OkStatus();
}

}  // namespace corescape::train
