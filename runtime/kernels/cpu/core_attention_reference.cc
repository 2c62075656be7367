#include "runtime/kernels/cpu/core_attention_reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace corescape::kernels {
namespace {

// Row pointers of one (task, head): query p, key j.
struct HeadView {
  const AttentionShape& shape;
  const AttentionTask& task;
  int head;
  int kv_head;

  int64_t QueryOffset(int64_t p) const {
    return (task.q_row + p - task.q_begin) * shape.n_heads * shape.head_dim +
           int64_t{head} * shape.head_dim;
  }
  int64_t KeyOffset(int64_t j) const {
    return (task.kv_row + j) * shape.n_kv_heads * shape.head_dim +
           int64_t{kv_head} * shape.head_dim;
  }
  int64_t LseIndex(int64_t p) const {
    return (task.q_row + p - task.q_begin) * shape.n_heads + head;
  }
};

double Dot(const float* a, const float* b, int n) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += double{a[i]} * b[i];
  return sum;
}

// Softmax probabilities of query p over keys 0..p; returns the log-sum-exp.
double Probabilities(const HeadView& view, const float* q, const float* k,
                     int64_t p, std::vector<double>& probs) {
  const int d = view.shape.head_dim;
  probs.resize(p + 1);
  double max = -INFINITY;
  for (int64_t j = 0; j <= p; ++j) {
    probs[j] = view.shape.softmax_scale *
               Dot(q + view.QueryOffset(p), k + view.KeyOffset(j), d);
    max = std::max(max, probs[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j <= p; ++j) {
    probs[j] = std::exp(probs[j] - max);
    sum += probs[j];
  }
  for (int64_t j = 0; j <= p; ++j) probs[j] /= sum;
  return max + std::log(sum);
}

template <typename Fn>
void ForEachHead(const AttentionShape& shape,
                 absl::Span<const AttentionTask> tasks, Fn fn) {
  const int heads_per_kv_head = shape.n_heads / shape.n_kv_heads;
  for (const AttentionTask& task : tasks) {
    for (int head = 0; head < shape.n_heads; ++head) {
      fn(HeadView{shape, task, head, head / heads_per_kv_head});
    }
  }
}

}  // namespace

absl::Status ReferenceAttentionForward(const AttentionShape& shape,
                                       absl::Span<const AttentionTask> tasks,
                                       const float* q, int64_t q_rows,
                                       const float* k, const float* v,
                                       int64_t kv_rows, float* o, float* lse) {
  if (absl::Status status = ValidateAttentionArgs(shape, tasks, q_rows, kv_rows);
      !status.ok()) {
    return status;
  }
  const int d = shape.head_dim;
  std::vector<double> probs;
  std::vector<double> out(d);
  ForEachHead(shape, tasks, [&](const HeadView& view) {
    for (int64_t p = view.task.q_begin; p < view.task.q_end; ++p) {
      lse[view.LseIndex(p)] = static_cast<float>(Probabilities(view, q, k, p, probs));
      std::fill(out.begin(), out.end(), 0.0);
      for (int64_t j = 0; j <= p; ++j) {
        const float* v_row = v + view.KeyOffset(j);
        for (int c = 0; c < d; ++c) out[c] += probs[j] * v_row[c];
      }
      float* o_row = o + view.QueryOffset(p);
      for (int c = 0; c < d; ++c) o_row[c] = static_cast<float>(out[c]);
    }
  });
  return absl::OkStatus();
}

absl::Status ReferenceAttentionBackward(const AttentionShape& shape,
                                        absl::Span<const AttentionTask> tasks,
                                        const float* q, int64_t q_rows,
                                        const float* k, const float* v,
                                        int64_t kv_rows, const float* d_o,
                                        float* d_q, float* d_k, float* d_v) {
  if (absl::Status status = ValidateAttentionArgs(shape, tasks, q_rows, kv_rows);
      !status.ok()) {
    return status;
  }
  const int d = shape.head_dim;
  const double scale = shape.softmax_scale;
  // dK/dV are summed in double over the whole call, then added once.
  std::vector<double> d_k_sum(kv_rows * shape.n_kv_heads * d, 0.0);
  std::vector<double> d_v_sum(d_k_sum.size(), 0.0);
  std::vector<double> probs;
  std::vector<double> grad_probs;
  std::vector<double> d_q_row(d);
  ForEachHead(shape, tasks, [&](const HeadView& view) {
    for (int64_t p = view.task.q_begin; p < view.task.q_end; ++p) {
      Probabilities(view, q, k, p, probs);
      const float* d_o_row = d_o + view.QueryOffset(p);
      const float* q_row = q + view.QueryOffset(p);
      grad_probs.resize(p + 1);
      double delta = 0.0;  // sum_j P_j dP_j
      for (int64_t j = 0; j <= p; ++j) {
        grad_probs[j] = Dot(d_o_row, v + view.KeyOffset(j), d);
        delta += probs[j] * grad_probs[j];
      }
      std::fill(d_q_row.begin(), d_q_row.end(), 0.0);
      for (int64_t j = 0; j <= p; ++j) {
        const double grad_score = probs[j] * (grad_probs[j] - delta) * scale;
        const int64_t key = view.KeyOffset(j);
        for (int c = 0; c < d; ++c) {
          d_q_row[c] += grad_score * k[key + c];
          d_k_sum[key + c] += grad_score * q_row[c];
          d_v_sum[key + c] += probs[j] * d_o_row[c];
        }
      }
      float* out = d_q + view.QueryOffset(p);
      for (int c = 0; c < d; ++c) out[c] = static_cast<float>(d_q_row[c]);
    }
  });
  for (size_t i = 0; i < d_k_sum.size(); ++i) {
    d_k[i] += static_cast<float>(d_k_sum[i]);
    d_v[i] += static_cast<float>(d_v_sum[i]);
  }
  return absl::OkStatus();
}

}  // namespace corescape::kernels
