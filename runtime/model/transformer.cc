#include "runtime/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace corescape::model {
namespace {

float* F(const device::DeviceBuffer& b) { return b.as<float>(); }
const int32_t* I(const device::DeviceBuffer& b) { return b.as<int32_t>(); }

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

Transformer::Transformer(const ModelConfig& config, std::shared_ptr<ModelOps> ops)
    : config_(config),
      layout_(config),
      ops_(std::move(ops)),
      parameters_(layout_.total_size(), 0.0f),
      gradients_(layout_.total_size(), 0.0f) {}

absl::StatusOr<Transformer> Transformer::Create(const ModelConfig& config,
                                                std::shared_ptr<ModelOps> ops) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  if (ops == nullptr) ops = NewCpuModelOps(CpuParameterMode::kInPlace, nullptr);
  return Transformer(config, std::move(ops));
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
  parameters_changed_ = true;
  host_parameters_stale_ = false;
}

absl::Status Transformer::ZeroGradients() {
  if (ops_->parameters_in_place()) {
    std::fill(gradients_.begin(), gradients_.end(), 0.0f);
    return absl::OkStatus();
  }
  const size_t bytes = gradients_.size() * sizeof(float);
  if (device_gradients_.size() != bytes) {
    device_gradients_.Reset();
    auto buffer = ops_->Allocate(bytes);
    if (!buffer.ok()) return buffer.status();
    device_gradients_ = *std::move(buffer);
  }
  return ops_->Zero(device_gradients_.data(), bytes);
}

absl::Status Transformer::DownloadGradients() {
  if (ops_->parameters_in_place()) return absl::OkStatus();
  if (device_gradients_.size() != gradients_.size() * sizeof(float)) {
    return absl::FailedPreconditionError(
        "DownloadGradients: no gradients in the backend (ZeroGradients starts a step)");
  }
  CORESCAPE_RETURN_IF_ERROR(
      ops_->Download(gradients_.data(), device_gradients_.data(), device_gradients_.size()));
  return ops_->Synchronize();
}

absl::Status Transformer::SyncParameters() {
  if (ops_->parameters_in_place()) return absl::OkStatus();
  const size_t bytes = parameters_.size() * sizeof(float);
  if (parameters_changed_) {
    if (device_parameters_.size() != bytes) {
      auto buffer = ops_->Allocate(bytes);
      if (!buffer.ok()) return buffer.status();
      device_parameters_ = *std::move(buffer);
    }
    CORESCAPE_RETURN_IF_ERROR(ops_->Upload(device_parameters_.data(), parameters_.data(), bytes));
    bf16_stale_ = true;
    parameters_changed_ = false;
  }
  if (bf16_stale_ && ops_->precision() == Precision::kBf16) {
    const size_t half_bytes = parameters_.size() * sizeof(uint16_t);
    if (bf16_parameters_.size() != half_bytes) {
      auto buffer = ops_->Allocate(half_bytes);
      if (!buffer.ok()) return buffer.status();
      bf16_parameters_ = *std::move(buffer);
    }
    CORESCAPE_RETURN_IF_ERROR(ops_->CastToBf16(F(device_parameters_),
                                               bf16_parameters_.as<uint16_t>(),
                                               static_cast<int64_t>(parameters_.size())));
  }
  bf16_stale_ = false;
  if (device_gradients_.size() != gradients_.size() * sizeof(float)) {
    CORESCAPE_RETURN_IF_ERROR(ZeroGradients());
  }
  return absl::OkStatus();
}

absl::StatusOr<float*> Transformer::BackendParameters() {
  if (ops_->parameters_in_place()) {
    return absl::FailedPreconditionError(
        "BackendParameters: the backend works on the host parameters in place");
  }
  CORESCAPE_RETURN_IF_ERROR(SyncParameters());
  return F(device_parameters_);
}

absl::StatusOr<float*> Transformer::BackendGradients() {
  if (ops_->parameters_in_place() || device_gradients_.size() != gradients_.size() * sizeof(float)) {
    return absl::FailedPreconditionError(
        "BackendGradients: no gradients in the backend (ZeroGradients starts a step)");
  }
  return F(device_gradients_);
}

void Transformer::MarkBackendParametersUpdated() {
  if (ops_->parameters_in_place()) return;
  host_parameters_stale_ = true;
  bf16_stale_ = true;
}

absl::Status Transformer::SetParameters(std::vector<float> values) {
  if (values.size() != parameters_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("SetParameters: ", values.size(),
                                                   " values, the model has ", parameters_.size()));
  }
  parameters_ = std::move(values);
  parameters_changed_ = true;
  host_parameters_stale_ = false;
  return absl::OkStatus();
}

absl::Status Transformer::DownloadParameters() {
  if (!host_parameters_stale_) return absl::OkStatus();
  CORESCAPE_RETURN_IF_ERROR(ops_->Download(parameters_.data(), device_parameters_.data(),
                                           parameters_.size() * sizeof(float)));
  host_parameters_stale_ = false;
  return absl::OkStatus();
}

const float* Transformer::Param(int64_t offset) const {
  return (ops_->parameters_in_place() ? parameters_.data() : F(device_parameters_)) + offset;
}

WeightView Transformer::Weight(int64_t offset) const {
  WeightView w;
  w.fp32 = Param(offset);
  if (bf16_parameters_.data() != nullptr) w.bf16 = bf16_parameters_.as<uint16_t>() + offset;
  return w;
}

float* Transformer::Grad(int64_t offset) {
  return (ops_->parameters_in_place() ? gradients_.data() : F(device_gradients_)) + offset;
}

int64_t Transformer::ScratchFloats(int64_t rows) const {
  return rows * std::max<int64_t>(config_.d_ff, config_.d_model);
}

absl::Status Transformer::Ensure(device::DeviceBuffer& buffer, int64_t floats, bool zero) {
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  if (buffer.size() != bytes || buffer.data() == nullptr) {
    buffer.Reset();
    if (bytes > 0) {
      auto fresh = ops_->Allocate(bytes);
      if (!fresh.ok()) return fresh.status();
      buffer = *std::move(fresh);
    }
  }
  return zero ? ops_->Zero(buffer.data(), bytes) : absl::OkStatus();
}

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

absl::Status Transformer::EmbedForward(Activations& a) {
  if (a.ops == nullptr) {
    a.ops = ops_;
  } else if (a.ops != ops_) {
    return absl::InvalidArgumentError("activations belong to another model backend");
  }
  CORESCAPE_RETURN_IF_ERROR(SyncParameters());
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  const size_t index_bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  // int32 arrays in float-sized buffers: both are 4 bytes.
  static_assert(sizeof(int32_t) == sizeof(float));
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.tokens, rows, false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.targets, rows, false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.positions, rows, false));
  CORESCAPE_RETURN_IF_ERROR(ops_->Upload(a.tokens.data(), a.batch.tokens.data(), index_bytes));
  CORESCAPE_RETURN_IF_ERROR(ops_->Upload(a.targets.data(), a.batch.targets.data(), index_bytes));
  CORESCAPE_RETURN_IF_ERROR(
      ops_->Upload(a.positions.data(), a.batch.positions.data(), index_bytes));
  a.layers.resize(config_.n_layers);
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.layers[0].x_in, rows * d, false));
  return ops_->EmbeddingForward(I(a.tokens), Param(layout_.token_embedding()),
                                F(a.layers[0].x_in), rows, d);
}

absl::Status Transformer::PreAttentionForward(int layer, Activations& a) {
  const LayerSlots& w = layout_.layer(layer);
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.attention_normed, rows * d, false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.attention_rstd, rows, false));
  CORESCAPE_RETURN_IF_ERROR(ops_->RmsNormForward(F(l.x_in), Param(w.attention_norm),
                                                 F(l.attention_normed), F(l.attention_rstd), rows,
                                                 d, config_.norm_eps));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.q, rows * config_.q_width(), false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.k, rows * config_.kv_width(), false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.v, rows * config_.kv_width(), false));
  CORESCAPE_RETURN_IF_ERROR(
      ops_->LinearForward(F(l.attention_normed), Weight(w.wq), F(l.q), rows, d, config_.q_width()));
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearForward(F(l.attention_normed), Weight(w.wk), F(l.k), rows,
                                                d, config_.kv_width()));
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearForward(F(l.attention_normed), Weight(w.wv), F(l.v), rows,
                                                d, config_.kv_width()));
  CORESCAPE_RETURN_IF_ERROR(ops_->RopeForward(F(l.q), I(a.positions), rows, config_.n_heads,
                                              config_.head_dim(), config_.rope_theta));
  return ops_->RopeForward(F(l.k), I(a.positions), rows, config_.n_kv_heads, config_.head_dim(),
                           config_.rope_theta);
}

AttentionInputs Transformer::CoreAttentionInputs(int layer, const Activations& a) const {
  const LayerActivations& l = a.layers[layer];
  AttentionInputs in;
  in.layer = layer;
  in.shape = attention_shape();
  in.tasks = a.batch.attention_tasks;
  in.rows = a.batch.rows();
  in.q = F(l.q);
  in.k = F(l.k);
  in.v = F(l.v);
  return in;
}

absl::StatusOr<AttentionForwardCall> Transformer::ForwardCall(int layer, Activations& a) {
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  // Rows outside every task (padding) keep zeros.
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.o, rows * config_.q_width(), true));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.lse, rows * config_.n_heads, true));
  AttentionForwardCall call;
  call.in = CoreAttentionInputs(layer, a);
  call.o = F(l.o);
  call.lse = F(l.lse);
  return call;
}

absl::Status Transformer::CoreAttentionForward(int layer, CoreAttentionExecutor& attention,
                                               Activations& a) {
  auto call = ForwardCall(layer, a);
  if (!call.ok()) return call.status();
  device::ProfileSpan span(ops_->op_profile().active(), "CoreAttentionForward");
  return attention.Forward(*call);
}

absl::Status Transformer::PostAttentionForward(int layer, Activations& a) {
  const LayerSlots& w = layout_.layer(layer);
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  const int64_t f = config_.d_ff;
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.x_mid, rows * d, false));
  CORESCAPE_RETURN_IF_ERROR(
      ops_->LinearForward(F(l.o), Weight(w.wo), F(l.x_mid), rows, config_.q_width(), d));
  CORESCAPE_RETURN_IF_ERROR(ops_->AddInto(F(l.x_mid), F(l.x_in), rows * d));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.ffn_normed, rows * d, false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.ffn_rstd, rows, false));
  CORESCAPE_RETURN_IF_ERROR(ops_->RmsNormForward(F(l.x_mid), Param(w.ffn_norm), F(l.ffn_normed),
                                                 F(l.ffn_rstd), rows, d, config_.norm_eps));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.gate, rows * f, false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.up, rows * f, false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(l.hidden, rows * f, false));
  CORESCAPE_RETURN_IF_ERROR(
      ops_->LinearForward(F(l.ffn_normed), Weight(w.w_gate), F(l.gate), rows, d, f));
  CORESCAPE_RETURN_IF_ERROR(
      ops_->LinearForward(F(l.ffn_normed), Weight(w.w_up), F(l.up), rows, d, f));
  CORESCAPE_RETURN_IF_ERROR(ops_->SwiGluForward(F(l.gate), F(l.up), F(l.hidden), rows * f));
  device::DeviceBuffer& out =
      layer + 1 < config_.n_layers ? a.layers[layer + 1].x_in : a.x_final;
  CORESCAPE_RETURN_IF_ERROR(Ensure(out, rows * d, false));
  CORESCAPE_RETURN_IF_ERROR(
      ops_->LinearForward(F(l.hidden), Weight(w.w_down), F(out), rows, f, d));
  return ops_->AddInto(F(out), F(l.x_mid), rows * d);
}

absl::StatusOr<LossResult> Transformer::HeadForward(Activations& a) {
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.final_normed, rows * d, false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.final_rstd, rows, false));
  CORESCAPE_RETURN_IF_ERROR(ops_->RmsNormForward(F(a.x_final), Param(layout_.final_norm()),
                                                 F(a.final_normed), F(a.final_rstd), rows, d,
                                                 config_.norm_eps));
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.logits, rows * config_.vocab_size, false));
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearForward(F(a.final_normed), Weight(layout_.lm_head()),
                                                F(a.logits), rows, d, config_.vocab_size));
  auto ce = ops_->CrossEntropy(F(a.logits), I(a.targets), rows, config_.vocab_size, nullptr, 0.0f);
  if (!ce.ok()) return ce.status();
  return LossResult{ce->loss_sum, ce->tokens};
}

absl::StatusOr<LossResult> Transformer::Forward(const ModelBatch& batch,
                                                CoreAttentionExecutor& attention,
                                                Activations& a) {
  if (absl::Status s = ValidateBatch(batch); !s.ok()) return s;
  a.batch = batch;
  CORESCAPE_RETURN_IF_ERROR(EmbedForward(a));
  for (int layer = 0; layer < config_.n_layers; ++layer) {
    CORESCAPE_RETURN_IF_ERROR(PreAttentionForward(layer, a));
    CORESCAPE_RETURN_IF_ERROR(CoreAttentionForward(layer, attention, a));
    CORESCAPE_RETURN_IF_ERROR(PostAttentionForward(layer, a));
  }
  return HeadForward(a);
}

absl::Status Transformer::HeadBackward(Activations& a, float grad_scale) {
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  const int64_t vocab = config_.vocab_size;
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.d_logits, rows * vocab, false));
  auto ce = ops_->CrossEntropy(F(a.logits), I(a.targets), rows, vocab, F(a.d_logits), grad_scale);
  if (!ce.ok()) return ce.status();
  device::DeviceBuffer& d_normed = a.scratch_a;
  CORESCAPE_RETURN_IF_ERROR(Ensure(d_normed, ScratchFloats(rows), false));
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearBackward(F(a.final_normed), Weight(layout_.lm_head()),
                                                 F(a.d_logits), F(d_normed),
                                                 Grad(layout_.lm_head()), rows, d, vocab));
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.d_x, rows * d, true));
  return ops_->RmsNormBackward(F(a.x_final), Param(layout_.final_norm()), F(a.final_rstd),
                               F(d_normed), F(a.d_x), Grad(layout_.final_norm()), rows, d);
}

absl::Status Transformer::PostAttentionBackward(int layer, Activations& a) {
  const LayerSlots& w = layout_.layer(layer);
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  const int64_t f = config_.d_ff;
  // x_out = x_mid + hidden·W_downᵀ; a.d_x holds ∂L/∂x_out and becomes ∂L/∂x_mid.
  // d_hidden, d_gate and d_up in the three scratch buffers (rows·max(f, d)).
  device::DeviceBuffer& d_hidden = a.scratch_a;
  device::DeviceBuffer& d_gate = a.scratch_b;
  device::DeviceBuffer& d_up = a.scratch_c;
  CORESCAPE_RETURN_IF_ERROR(Ensure(d_hidden, ScratchFloats(rows), false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(d_gate, ScratchFloats(rows), false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(d_up, ScratchFloats(rows), false));
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearBackward(F(l.hidden), Weight(w.w_down), F(a.d_x),
                                                 F(d_hidden), Grad(w.w_down), rows, f, d));
  CORESCAPE_RETURN_IF_ERROR(ops_->SwiGluBackward(F(l.gate), F(l.up), F(d_hidden), F(d_gate),
                                                 F(d_up), rows * f));
  // d_hidden is free again: ∂L/∂ffn_normed from the gate goes in its first
  // rows·d, from the up projection in d_o (written only after both are summed).
  float* d_normed = F(d_hidden);
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.d_o, std::max<int64_t>(rows * config_.q_width(), rows * d),
                                   false));
  float* d_normed_up = F(a.d_o);
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearBackward(F(l.ffn_normed), Weight(w.w_gate), F(d_gate),
                                                 d_normed, Grad(w.w_gate), rows, d, f));
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearBackward(F(l.ffn_normed), Weight(w.w_up), F(d_up),
                                                 d_normed_up, Grad(w.w_up), rows, d, f));
  CORESCAPE_RETURN_IF_ERROR(ops_->AddInto(d_normed, d_normed_up, rows * d));
  CORESCAPE_RETURN_IF_ERROR(ops_->RmsNormBackward(F(l.x_mid), Param(w.ffn_norm), F(l.ffn_rstd),
                                                  d_normed, F(a.d_x), Grad(w.ffn_norm), rows, d));
  // x_mid = x_in + o·W_oᵀ; a.d_x stays as the residual part of ∂L/∂x_in.
  return ops_->LinearBackward(F(l.o), Weight(w.wo), F(a.d_x), F(a.d_o), Grad(w.wo), rows,
                              config_.q_width(), d);
}

absl::StatusOr<AttentionBackwardCall> Transformer::BackwardCall(int layer, Activations& a) {
  const LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.d_q, rows * config_.q_width(), true));
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.d_k, rows * config_.kv_width(), true));
  CORESCAPE_RETURN_IF_ERROR(Ensure(a.d_v, rows * config_.kv_width(), true));
  AttentionBackwardCall call;
  call.in = CoreAttentionInputs(layer, a);
  call.o = F(l.o);
  call.lse = F(l.lse);
  call.d_o = F(a.d_o);
  call.d_q = F(a.d_q);
  call.d_k = F(a.d_k);
  call.d_v = F(a.d_v);
  return call;
}

absl::Status Transformer::CoreAttentionBackward(int layer, CoreAttentionExecutor& attention,
                                                Activations& a) {
  auto call = BackwardCall(layer, a);
  if (!call.ok()) return call.status();
  device::ProfileSpan span(ops_->op_profile().active(), "CoreAttentionBackward");
  return attention.Backward(*call);
}

absl::Status Transformer::StartCoreAttentionForward(int layer, int half,
                                                    CoreAttentionExecutor& attention,
                                                    Activations& a) {
  auto call = ForwardCall(layer, a);
  if (!call.ok()) return call.status();
  return attention.StartForward(half, *call);
}

absl::Status Transformer::StartCoreAttentionBackward(int layer, int half,
                                                     CoreAttentionExecutor& attention,
                                                     Activations& a) {
  auto call = BackwardCall(layer, a);
  if (!call.ok()) return call.status();
  return attention.StartBackward(half, *call);
}

absl::Status Transformer::PreAttentionBackward(int layer, Activations& a) {
  const LayerSlots& w = layout_.layer(layer);
  LayerActivations& l = a.layers[layer];
  const int64_t rows = a.batch.rows();
  const int64_t d = config_.d_model;
  CORESCAPE_RETURN_IF_ERROR(ops_->RopeBackward(F(a.d_q), I(a.positions), rows, config_.n_heads,
                                               config_.head_dim(), config_.rope_theta));
  CORESCAPE_RETURN_IF_ERROR(ops_->RopeBackward(F(a.d_k), I(a.positions), rows,
                                               config_.n_kv_heads, config_.head_dim(),
                                               config_.rope_theta));
  device::DeviceBuffer& d_normed = a.scratch_a;
  device::DeviceBuffer& d_part = a.scratch_b;
  CORESCAPE_RETURN_IF_ERROR(Ensure(d_normed, ScratchFloats(rows), false));
  CORESCAPE_RETURN_IF_ERROR(Ensure(d_part, ScratchFloats(rows), false));
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearBackward(F(l.attention_normed), Weight(w.wq), F(a.d_q),
                                                 F(d_normed), Grad(w.wq), rows, d,
                                                 config_.q_width()));
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearBackward(F(l.attention_normed), Weight(w.wk), F(a.d_k),
                                                 F(d_part), Grad(w.wk), rows, d,
                                                 config_.kv_width()));
  CORESCAPE_RETURN_IF_ERROR(ops_->AddInto(F(d_normed), F(d_part), rows * d));
  CORESCAPE_RETURN_IF_ERROR(ops_->LinearBackward(F(l.attention_normed), Weight(w.wv), F(a.d_v),
                                                 F(d_part), Grad(w.wv), rows, d,
                                                 config_.kv_width()));
  CORESCAPE_RETURN_IF_ERROR(ops_->AddInto(F(d_normed), F(d_part), rows * d));
  return ops_->RmsNormBackward(F(l.x_in), Param(w.attention_norm), F(l.attention_rstd),
                               F(d_normed), F(a.d_x), Grad(w.attention_norm), rows, d);
}

absl::Status Transformer::EmbedBackward(Activations& a) {
  return ops_->EmbeddingBackward(I(a.tokens), F(a.d_x), Grad(layout_.token_embedding()),
                                 a.batch.rows(), config_.d_model);
}

absl::Status Transformer::Backward(CoreAttentionExecutor& attention, Activations& a,
                                   float grad_scale) {
  CORESCAPE_RETURN_IF_ERROR(HeadBackward(a, grad_scale));
  for (int layer = config_.n_layers - 1; layer >= 0; --layer) {
    CORESCAPE_RETURN_IF_ERROR(PostAttentionBackward(layer, a));
    CORESCAPE_RETURN_IF_ERROR(CoreAttentionBackward(layer, attention, a));
    CORESCAPE_RETURN_IF_ERROR(PreAttentionBackward(layer, a));
  }
  return EmbedBackward(a);
}

}  // namespace corescape::model
