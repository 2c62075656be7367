#include "runtime/train/ping_pong_schedule.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace corescape::train {
namespace {

// `first`..`last` (exclusive) of a vector of B*T entries.
std::vector<int32_t> Rows(const std::vector<int32_t>& values, int64_t first, int64_t last) {
  return std::vector<int32_t>(values.begin() + first, values.begin() + last);
}

}  // namespace

absl::StatusOr<std::array<model::ModelBatch, 2>> SplitIntoHalves(const model::ModelBatch& batch) {
  if (batch.batch_size < 2 || batch.seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ping-pong needs at least two rows to split, the micro-batch has ", batch.batch_size));
  }
  const int64_t rows = batch.rows();
  if (static_cast<int64_t>(batch.tokens.size()) != rows ||
      static_cast<int64_t>(batch.targets.size()) != rows ||
      static_cast<int64_t>(batch.positions.size()) != rows) {
    return absl::InvalidArgumentError("batch: tokens, targets and positions must have B*T entries");
  }
  const int rows_a = (batch.batch_size + 1) / 2;
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
  auto halves = SplitIntoHalves(batch);
  if (!halves.ok()) return halves.status();
  model::Activations& a = halves_[kA];
  model::Activations& b = halves_[kB];
  a.batch = std::move((*halves)[kA]);
  b.batch = std::move((*halves)[kB]);
  const int layers = model_.config().n_layers;

  model_.EmbedForward(a);
  model_.PreAttentionForward(0, a);
  if (absl::Status s = model_.StartCoreAttentionForward(0, kA, attention, a); !s.ok()) return s;
  model_.EmbedForward(b);
  model::LossResult loss_a;
  for (int l = 0; l < layers; ++l) {
    model_.PreAttentionForward(l, b);
    if (absl::Status s = model_.StartCoreAttentionForward(l, kB, attention, b); !s.ok()) return s;
    if (absl::Status s = attention.FinishForward(kA); !s.ok()) return s;
    model_.PostAttentionForward(l, a);
    if (l + 1 < layers) {
      model_.PreAttentionForward(l + 1, a);
      if (absl::Status s = model_.StartCoreAttentionForward(l + 1, kA, attention, a); !s.ok()) {
        return s;
      }
    } else {
      loss_a = model_.HeadForward(a);  // while B's last attention is out
    }
    if (absl::Status s = attention.FinishForward(kB); !s.ok()) return s;
    model_.PostAttentionForward(l, b);
  }
  const model::LossResult loss_b = model_.HeadForward(b);
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

  model_.HeadBackward(a, grad_scale);
  model_.PostAttentionBackward(layers - 1, a);
  if (absl::Status s = model_.StartCoreAttentionBackward(layers - 1, kA, attention, a);
      !s.ok()) {
    return s;
  }
  model_.HeadBackward(b, grad_scale);
  for (int l = layers - 1; l >= 0; --l) {
    model_.PostAttentionBackward(l, b);
    if (absl::Status s = model_.StartCoreAttentionBackward(l, kB, attention, b); !s.ok()) {
      return s;
    }
    if (absl::Status s = attention.FinishBackward(kA); !s.ok()) return s;
    model_.PreAttentionBackward(l, a);
    if (l > 0) {
      model_.PostAttentionBackward(l - 1, a);
      if (absl::Status s = model_.StartCoreAttentionBackward(l - 1, kA, attention, a); !s.ok()) {
        return s;
      }
    } else {
      model_.EmbedBackward(a);  // while B's last attention is out
    }
    if (absl::Status s = attention.FinishBackward(kB); !s.ok()) return s;
    model_.PreAttentionBackward(l, b);
  }
  model_.EmbedBackward(b);
  return absl::OkStatus();
}

}  // namespace corescape::train
