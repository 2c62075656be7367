#include "runtime/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cpu/embedding.h"
#include "runtime/kernels/cpu/linear.h"
#include "runtime/kernels/cpu/rmsnorm.h"
#include "runtime/kernels/cpu/rope.h"
#include "runtime/kernels/cpu/swiglu.h"

namespace corescape::model {
namespace {

using kernels::LinearBackward;
using kernels::LinearForward;

void Resize(std::vector<float>& v, int64_t n) { v.assign(n, 0.0f); }

void AddInto(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

// Box–Muller over mt19937_64, so weights are identical on every machine
// (std::normal_distribution is implementation-defined).
class NormalSampler {
 public:
  explicit NormalSampler(uint64_t seed) : engine_(seed) {}
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1, u2;
    do {
      u1 = (engine_() >> 11) * 0x1.0p-53;
    } while (u1 <= 0.0);
    u2 = (engine_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace

Transformer::Transformer(const ModelConfig& config)
    : config_(config),
      layout_(config),
      parameters_(layout_.total_size(), 0.0f),
      gradients_(layout_.total_size(), 0.0f) {}

absl::StatusOr<Transformer> Transformer::Create(const ModelConfig& config) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  return Transformer(config);
}

kernels::AttentionShape Transformer::attention_shape() const {
  kernels::AttentionShape shape;
  shape.n_heads = config_.n_heads;
  shape.n_kv_heads = config_.n_kv_heads;
  shape.head_dim = config_.head_dim();
  shape.softmax_scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim()));
  return shape;
}

void Transformer::InitializeWeights(uint64_t seed) {
  NormalSampler sampler(seed);
  for (const TensorSlot& slot : layout_.tensors()) {
    float* p = parameters_.data() + slot.offset;
    if (slot.is_matrix) {
      for (int64_t i = 0; i < slot.size; ++i) p[i] = static_cast<float>(0.02 * sampler.Next());
    } else {
      std::fill(p, p + slot.size, 1.0f);  // RMSNorm gains
    }
  }
}

void Transformer::ZeroGradients() { std::fill(gradients_.begin(), gradients_.end(), 0.0f); }

absl::Status Transformer::ValidateBatch(const ModelBatch& batch) const {
  if (batch.batch_size <= 0 || batch.seq_len <= 0) {
    return absl::InvalidArgumentError("batch: batch_size and seq_len must be positive");
  }
  if (batch.seq_len > config_.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch: seq_len ", batch.seq_len, " exceeds model max_seq_len ", config_.max_seq_len));
  }
  const int64_t rows = batch.rows();
  if (static_cast<int64_t>(batch.tokens.size()) != rows ||
      static_cast<int64_t>(batch.targets.size()) != rows ||
      static_cast<int64_t>(batch.positions.size()) != rows) {
    return absl::InvalidArgumentError("batch: tokens, targets and positions must have B*T entries");
  }
  for (int64_t i = 0; i < rows; ++i) {
    if (batch.tokens[i] < 0 || batch.tokens[i] >= config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "batch: token ", batch.tokens[i], " at row ", i, " outside vocabulary of ",
          config_.vocab_size));
    }
    if (batch.targets[i] < -1 || batch.targets[i] >= config_.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch: target ", batch.targets[i], " at row ", i, " out of range"));
    }
    if (batch.positions[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("batch: negative position at row ", i));
    }
  }
  // The attention kernel validates the task geometry itself.
  return absl::OkStatus();
}

void Transformer::EmbedForward(Activations& a) const {
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  a.layers.resize(config_.n_layers);
  Resize(a.layers[0].x_in, rows * d);
  kernels::EmbeddingForward(a.batch.tokens.data(),
                            parameters_.data() + layout_.token_embedding(),
                            a.layers[0].x_in.data(), rows, d);
}

void Transformer::PreAttentionForward(int layer, Activations& a) const {
  const LayerSlots& w = layout_.layer(layer);
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  const float* p = parameters_.data();
  Resize(l.attention_normed, rows * d);
  Resize(l.attention_rstd, rows);
  kernels::RmsNormForward(l.x_in.data(), p + w.attention_norm, l.attention_normed.data(),
                          l.attention_rstd.data(), rows, d, config_.norm_eps);
  Resize(l.q, rows * config_.q_width());
  Resize(l.k, rows * config_.kv_width());
  Resize(l.v, rows * config_.kv_width());
  LinearForward(l.attention_normed.data(), p + w.wq, l.q.data(), rows, d, config_.q_width());
  LinearForward(l.attention_normed.data(), p + w.wk, l.k.data(), rows, d, config_.kv_width());
  LinearForward(l.attention_normed.data(), p + w.wv, l.v.data(), rows, d, config_.kv_width());
  kernels::RopeForward(l.q.data(), a.batch.positions.data(), rows, config_.n_heads,
                       config_.head_dim(), config_.rope_theta);
  kernels::RopeForward(l.k.data(), a.batch.positions.data(), rows, config_.n_kv_heads,
                       config_.head_dim(), config_.rope_theta);
}

AttentionInputs Transformer::CoreAttentionInputs(int layer, const Activations& a) const {
  const LayerActivations& l = a.layers[layer];
  AttentionInputs in;
  in.layer = layer;
  in.shape = attention_shape();
  in.tasks = a.batch.attention_tasks;
  in.rows = a.batch.rows();
  in.q = l.q.data();
  in.k = l.k.data();
  in.v = l.v.data();
  return in;
}

AttentionForwardCall Transformer::ForwardCall(int layer, Activations& a) const {
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  // Rows outside every task (padding) keep zeros.
  Resize(l.o, rows * config_.q_width());
  Resize(l.lse, rows * config_.n_heads);
  AttentionForwardCall call;
  call.in = CoreAttentionInputs(layer, a);
  call.o = l.o.data();
  call.lse = l.lse.data();
  return call;
}

absl::Status Transformer::CoreAttentionForward(int layer, CoreAttentionExecutor& attention,
                                               Activations& a) const {
  return attention.Forward(ForwardCall(layer, a));
}

void Transformer::PostAttentionForward(int layer, Activations& a) const {
  const LayerSlots& w = layout_.layer(layer);
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  const int64_t f = config_.d_ff;
  const float* p = parameters_.data();
  Resize(l.x_mid, rows * d);
  LinearForward(l.o.data(), p + w.wo, l.x_mid.data(), rows, config_.q_width(), d);
  AddInto(l.x_mid.data(), l.x_in.data(), rows * d);
  Resize(l.ffn_normed, rows * d);
  Resize(l.ffn_rstd, rows);
  kernels::RmsNormForward(l.x_mid.data(), p + w.ffn_norm, l.ffn_normed.data(),
                          l.ffn_rstd.data(), rows, d, config_.norm_eps);
  Resize(l.gate, rows * f);
  Resize(l.up, rows * f);
  Resize(l.hidden, rows * f);
  LinearForward(l.ffn_normed.data(), p + w.w_gate, l.gate.data(), rows, d, f);
  LinearForward(l.ffn_normed.data(), p + w.w_up, l.up.data(), rows, d, f);
  kernels::SwiGluForward(l.gate.data(), l.up.data(), l.hidden.data(), rows * f);
  std::vector<float>& out =
      layer + 1 < config_.n_layers ? a.layers[layer + 1].x_in : a.x_final;
  Resize(out, rows * d);
  LinearForward(l.hidden.data(), p + w.w_down, out.data(), rows, f, d);
  AddInto(out.data(), l.x_mid.data(), rows * d);
}

LossResult Transformer::HeadForward(Activations& a) const {
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  const float* p = parameters_.data();
  Resize(a.final_normed, rows * d);
  Resize(a.final_rstd, rows);
  kernels::RmsNormForward(a.x_final.data(), p + layout_.final_norm(), a.final_normed.data(),
                          a.final_rstd.data(), rows, d, config_.norm_eps);
  Resize(a.logits, rows * config_.vocab_size);
  LinearForward(a.final_normed.data(), p + layout_.lm_head(), a.logits.data(), rows, d,
                config_.vocab_size);
  kernels::CrossEntropyResult ce = kernels::CrossEntropy(
      a.logits.data(), a.batch.targets.data(), rows, config_.vocab_size, nullptr, 0.0f);
  return LossResult{ce.loss_sum, ce.tokens};
}

absl::StatusOr<LossResult> Transformer::Forward(const ModelBatch& batch,
                                                CoreAttentionExecutor& attention,
                                                Activations& a) const {
  if (absl::Status s = ValidateBatch(batch); !s.ok()) return s;
  a.batch = batch;
  EmbedForward(a);
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    PreAttentionForward(layer, a);
    if (absl::Status s = CoreAttentionForward(layer, attention, a); !s.ok()) return s;
    PostAttentionForward(layer, a);
  }
  return HeadForward(a);
}

void Transformer::HeadBackward(Activations& a, float grad_scale) {
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  const int64_t vocab = config_.vocab_size;
  float* g = gradients_.data();
  const float* p = parameters_.data();
  std::vector<float> d_logits(rows * vocab);
  kernels::CrossEntropy(a.logits.data(), a.batch.targets.data(), rows, vocab,
                        d_logits.data(), grad_scale);
  std::vector<float> d_normed(rows * d);
  LinearBackward(a.final_normed.data(), p + layout_.lm_head(), d_logits.data(),
                 d_normed.data(), g + layout_.lm_head(), rows, d, vocab);
  Resize(a.d_x, rows * d);
  kernels::RmsNormBackward(a.x_final.data(), p + layout_.final_norm(), a.final_rstd.data(),
                           d_normed.data(), a.d_x.data(), g + layout_.final_norm(), rows, d);
}

void Transformer::PostAttentionBackward(int layer, Activations& a) {
  const LayerSlots& w = layout_.layer(layer);
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  const int64_t f = config_.d_ff;
  float* g = gradients_.data();
  const float* p = parameters_.data();
  // x_out = x_mid + hidden·W_downᵀ; a.d_x holds ∂L/∂x_out and becomes ∂L/∂x_mid.
  std::vector<float> d_hidden(rows * f), d_gate(rows * f), d_up(rows * f);
  LinearBackward(l.hidden.data(), p + w.w_down, a.d_x.data(), d_hidden.data(),
                 g + w.w_down, rows, f, d);
  kernels::SwiGluBackward(l.gate.data(), l.up.data(), d_hidden.data(), d_gate.data(),
                          d_up.data(), rows * f);
  std::vector<float> d_normed(rows * d), d_normed_up(rows * d);
  LinearBackward(l.ffn_normed.data(), p + w.w_gate, d_gate.data(), d_normed.data(),
                 g + w.w_gate, rows, d, f);
  LinearBackward(l.ffn_normed.data(), p + w.w_up, d_up.data(), d_normed_up.data(),
                 g + w.w_up, rows, d, f);
  AddInto(d_normed.data(), d_normed_up.data(), rows * d);
  kernels::RmsNormBackward(l.x_mid.data(), p + w.ffn_norm, l.ffn_rstd.data(),
                           d_normed.data(), a.d_x.data(), g + w.ffn_norm, rows, d);
  // x_mid = x_in + o·W_oᵀ; a.d_x stays as the residual part of ∂L/∂x_in.
  Resize(a.d_o, rows * config_.q_width());
  LinearBackward(l.o.data(), p + w.wo, a.d_x.data(), a.d_o.data(), g + w.wo, rows,
                 config_.q_width(), d);
}

AttentionBackwardCall Transformer::BackwardCall(int layer, Activations& a) const {
  const LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  Resize(a.d_q, rows * config_.q_width());
  Resize(a.d_k, rows * config_.kv_width());
  Resize(a.d_v, rows * config_.kv_width());
  AttentionBackwardCall call;
  call.in = CoreAttentionInputs(layer, a);
  call.o = l.o.data();
  call.lse = l.lse.data();
  call.d_o = a.d_o.data();
  call.d_q = a.d_q.data();
  call.d_k = a.d_k.data();
  call.d_v = a.d_v.data();
  return call;
}

absl::Status Transformer::CoreAttentionBackward(int layer, CoreAttentionExecutor& attention,
                                                Activations& a) {
  return attention.Backward(BackwardCall(layer, a));
}

absl::Status Transformer::StartCoreAttentionForward(int layer, int half,
                                                    CoreAttentionExecutor& attention,
                                                    Activations& a) const {
  return attention.StartForward(half, ForwardCall(layer, a));
}

absl::Status Transformer::StartCoreAttentionBackward(int layer, int half,
                                                     CoreAttentionExecutor& attention,
                                                     Activations& a) {
  return attention.StartBackward(half, BackwardCall(layer, a));
}

void Transformer::PreAttentionBackward(int layer, Activations& a) {
  const LayerSlots& w = layout_.layer(layer);
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  float* g = gradients_.data();
  const float* p = parameters_.data();
  kernels::RopeBackward(a.d_q.data(), a.batch.positions.data(), rows, config_.n_heads,
                        config_.head_dim(), config_.rope_theta);
  kernels::RopeBackward(a.d_k.data(), a.batch.positions.data(), rows, config_.n_kv_heads,
                        config_.head_dim(), config_.rope_theta);
  std::vector<float> d_normed(rows * d), d_part(rows * d);
  LinearBackward(l.attention_normed.data(), p + w.wq, a.d_q.data(), d_normed.data(),
                 g + w.wq, rows, d, config_.q_width());
  LinearBackward(l.attention_normed.data(), p + w.wk, a.d_k.data(), d_part.data(),
                 g + w.wk, rows, d, config_.kv_width());
  AddInto(d_normed.data(), d_part.data(), rows * d);
  LinearBackward(l.attention_normed.data(), p + w.wv, a.d_v.data(), d_part.data(),
                 g + w.wv, rows, d, config_.kv_width());
  AddInto(d_normed.data(), d_part.data(), rows * d);
  kernels::RmsNormBackward(l.x_in.data(), p + w.attention_norm, l.attention_rstd.data(),
                           d_normed.data(), a.d_x.data(), g + w.attention_norm, rows, d);
}

void Transformer::EmbedBackward(Activations& a) {
  kernels::EmbeddingBackward(a.batch.tokens.data(), a.d_x.data(),
                             gradients_.data() + layout_.token_embedding(), a.batch.rows(),
                             config_.d_model);
}

absl::Status Transformer::Backward(CoreAttentionExecutor& attention, Activations& a,
                                   float grad_scale) {
  HeadBackward(a, grad_scale);
  for (int layer = config_.n_layers - 1; layer >= 0; --layer) {
    PostAttentionBackward(layer, a);
    if (absl::Status s = CoreAttentionBackward(layer, attention, a); !s.ok()) return s;
    PreAttentionBackward(layer, a);
  }
  EmbedBackward(a);
  return absl::OkStatus();
}

}  // namespace corescape::model
