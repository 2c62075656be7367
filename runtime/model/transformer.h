#ifndef CORESCAPE_RUNTIME_MODEL_TRANSFORMER_H_
#define CORESCAPE_RUNTIME_MODEL_TRANSFORMER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/model/core_attention_executor.h"
#include "runtime/model/model_config.h"
#include "runtime/model/parameter_layout.h"

namespace corescape::model {

// One micro-batch of packed sequences as the model sees it.
struct ModelBatch {
  int batch_size = 0;
  int seq_len = 0;
  std::vector<int32_t> tokens;     // [B*T]
  std::vector<int32_t> targets;    // [B*T], −1 = not counted in the loss
  std::vector<int32_t> positions;  // [B*T], RoPE position within the document
  // Causal attention runs within each task only: one task per document piece
  // (q_row = kv_row = its first row, queries [0, length)), or finer splits.
  std::vector<kernels::AttentionTask> attention_tasks;

  int64_t rows() const { return int64_t{batch_size} * seq_len; }
};

// Per-layer activations kept from forward for backward.
struct LayerActivations {
  std::vector<float> x_in, attention_normed, attention_rstd;
  std::vector<float> q, k, v, o, lse;  // q and k after RoPE
  std::vector<float> x_mid, ffn_normed, ffn_rstd, gate, up, hidden;
};

// Everything one micro-batch's forward produced. Separate from the model so
// two halves of a micro-batch can be in flight at once (ping-pong).
struct Activations {
  ModelBatch batch;
  std::vector<LayerActivations> layers;
  std::vector<float> x_final, final_normed, final_rstd, logits;
  // Gradient buffers reused across layers in backward.
  std::vector<float> d_x, d_q, d_k, d_v, d_o;
};

struct LossResult {
  double loss_sum = 0.0;  // summed over counted tokens
  int64_t tokens = 0;
  double mean() const { return tokens > 0 ? loss_sum / tokens : 0.0; }
};

// A decoder-only Llama-style transformer on CPU: token embedding, per layer
// RMSNorm → Q/K/V (GQA) → RoPE → core attention → output projection →
// residual → RMSNorm → SwiGLU MLP → residual; final RMSNorm; LM head
// (optionally tied). Parameters live in one flat fp32 buffer, gradients in
// another with the same layout (ParameterLayout).
//
// Each layer is three calls — PreAttention, core attention (through a
// CoreAttentionExecutor), PostAttention — with matching backward calls, so
// core attention can run elsewhere.
class Transformer {
 public:
  static absl::StatusOr<Transformer> Create(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  std::vector<float>& parameters() { return parameters_; }
  const std::vector<float>& parameters() const { return parameters_; }
  std::vector<float>& gradients() { return gradients_; }
  kernels::AttentionShape attention_shape() const;

  // Deterministic: N(0, 0.02) matrices and embeddings, ones for norms.
  void InitializeWeights(uint64_t seed);
  void ZeroGradients();

  // Checks token ids, targets, positions and tasks against the config.
  absl::Status ValidateBatch(const ModelBatch& batch) const;

  // Whole forward: embedding, every layer, final norm, logits, loss.
  absl::StatusOr<LossResult> Forward(const ModelBatch& batch,
                                     CoreAttentionExecutor& attention,
                                     Activations& activations) const;
  // Whole backward from the loss; gradients are ACCUMULATED, the loss
  // gradient scaled by grad_scale (e.g. 1 / counted tokens of the global
  // batch, so micro-batches and ranks sum to the mean).
  absl::Status Backward(CoreAttentionExecutor& attention, Activations& activations,
                        float grad_scale);

  // The per-layer pieces (Forward/Backward call these in order).
  void EmbedForward(Activations& a) const;
  void PreAttentionForward(int layer, Activations& a) const;
  absl::Status CoreAttentionForward(int layer, CoreAttentionExecutor& attention,
                                    Activations& a) const;
  void PostAttentionForward(int layer, Activations& a) const;
  LossResult HeadForward(Activations& a) const;

  void HeadBackward(Activations& a, float grad_scale);
  // Consumes a.d_x (gradient at the layer output); leaves a.d_o and
  // accumulates the residual gradient into a.d_x.
  void PostAttentionBackward(int layer, Activations& a);
  absl::Status CoreAttentionBackward(int layer, CoreAttentionExecutor& attention,
                                     Activations& a);
  void PreAttentionBackward(int layer, Activations& a);
  void EmbedBackward(Activations& a);

  // Core attention in two phases for ping-pong (`half` 0 or 1; see
  // CoreAttentionExecutor::StartForward): Start prepares the layer's output
  // buffers and hands the call to the executor; the executor's
  // Finish*(half) completes it. `a` must not change in between.
  absl::Status StartCoreAttentionForward(int layer, int half, CoreAttentionExecutor& attention,
                                         Activations& a) const;
  absl::Status StartCoreAttentionBackward(int layer, int half, CoreAttentionExecutor& attention,
                                          Activations& a);

 private:
  explicit Transformer(const ModelConfig& config);
  AttentionInputs CoreAttentionInputs(int layer, const Activations& a) const;
  // Layer `layer`'s core-attention call over `a`, its output buffers sized.
  AttentionForwardCall ForwardCall(int layer, Activations& a) const;
  AttentionBackwardCall BackwardCall(int layer, Activations& a) const;

  ModelConfig config_;
  ParameterLayout layout_;
  std::vector<float> parameters_;
  std::vector<float> gradients_;
};

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_TRANSFORMER_H_
