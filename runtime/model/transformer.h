#ifndef CORESCAPE_RUNTIME_MODEL_TRANSFORMER_H_
#define CORESCAPE_RUNTIME_MODEL_TRANSFORMER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "glog/logging.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/model/core_attention_executor.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_ops.h"
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

// Per-layer activations kept from forward for backward, in the model
// backend's memory (ModelOps): fp32, row-major.
struct LayerActivations {
  device::DeviceBuffer x_in, attention_normed, attention_rstd;
  device::DeviceBuffer q, k, v, o, lse;  // q and k after RoPE
  device::DeviceBuffer x_mid, ffn_normed, ffn_rstd, gate, up, hidden;
};

// Everything one micro-batch's forward produced. Separate from the model so
// two halves of a micro-batch can be in flight at once (ping-pong). Its
// buffers belong to the model's backend, which it keeps alive.
struct Activations {
  std::shared_ptr<ModelOps> ops;  // first: its buffers are freed before it
  ModelBatch batch;               // on the host
  device::DeviceBuffer tokens, targets, positions;  // the batch in the backend's memory
  std::vector<LayerActivations> layers;
  device::DeviceBuffer x_final, final_normed, final_rstd, logits;
  // Gradient buffers reused across layers in backward.
  device::DeviceBuffer d_x, d_q, d_k, d_v, d_o;
  // Scratch of backward, reused across layers.
  device::DeviceBuffer d_logits, scratch_a, scratch_b, scratch_c;
};

struct LossResult {
  double loss_sum = 0.0;  // summed over counted tokens
  int64_t tokens = 0;
  double mean() const { return tokens > 0 ? loss_sum / tokens : 0.0; }
};

// A decoder-only Llama-style transformer: token embedding, per layer
// RMSNorm → Q/K/V (GQA) → RoPE → core attention → output projection →
// residual → RMSNorm → SwiGLU MLP → residual; final RMSNorm; LM head
// (optionally tied). Parameters live in one flat fp32 host buffer,
// gradients in another with the same layout (ParameterLayout); the
// optimizer works on those.
//
// The step is written once against ModelOps: on the CPU backend (the
// default) the kernels read and write the host buffers in place; on a GPU
// the parameters are uploaded once after they change (parameters() marks
// them changed), gradients accumulate in device memory and
// DownloadGradients() brings them to gradients().
//
// Each layer is three calls — PreAttention, core attention (through a
// CoreAttentionExecutor), PostAttention — with matching backward calls, so
// core attention can run elsewhere. Executors get pointers into the
// backend's memory: remote ones need a host-addressable backend.
class Transformer {
 public:
  // `ops` null: the CPU backend, in place.
  static absl::StatusOr<Transformer> Create(const ModelConfig& config,
                                            std::shared_ptr<ModelOps> ops = nullptr);

  const ModelConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  // The host parameters. The mutable accessor marks them changed: the next
  // forward uploads them to a device backend. Once an optimizer has updated
  // the backend's copy (MarkBackendParametersUpdated), the host copy is
  // stale until DownloadParameters(); reading it before is a bug (checked).
  std::vector<float>& parameters() {
    CHECK(!host_parameters_stale_) << "host parameters read before DownloadParameters()";
    parameters_changed_ = true;
    return parameters_;
  }
  const std::vector<float>& parameters() const {
    CHECK(!host_parameters_stale_) << "host parameters read before DownloadParameters()";
    return parameters_;
  }
  // Replaces the parameters (uploaded by the next forward); INVALID_ARGUMENT
  // for a size other than the layout's.
  absl::Status SetParameters(std::vector<float> values);
  // Whether the host parameters are current (DownloadParameters makes them).
  bool host_parameters_current() const { return !host_parameters_stale_; }
  // Host gradients: current after DownloadGradients() (always, in place).
  std::vector<float>& gradients() { return gradients_; }

  // A device backend's own parameter and gradient buffers, for an optimizer
  // whose state lives beside them (FAILED_PRECONDITION in place, and for
  // the gradients before ZeroGradients). BackendParameters uploads changed
  // host parameters first.
  absl::StatusOr<float*> BackendParameters();
  absl::StatusOr<float*> BackendGradients();
  // The backend's parameters were updated there: the bf16 shadow is recast
  // before the next forward, and the host copy is stale until
  // DownloadParameters(). A no-op in place.
  void MarkBackendParametersUpdated();
  // Copies the backend's parameters to the host when they are newer.
  absl::Status DownloadParameters();
  ModelOps& ops() const { return *ops_; }
  kernels::AttentionShape attention_shape() const;

  // Deterministic: N(0, 0.02) matrices and embeddings, ones for norms.
  void InitializeWeights(uint64_t seed);
  // Zeroes the gradients where the kernels accumulate them (the host
  // gradients in place, the backend's otherwise).
  absl::Status ZeroGradients();
  // Copies the backend's accumulated gradients into gradients() (a no-op
  // in place).
  absl::Status DownloadGradients();

  // Checks token ids, targets, positions and tasks against the config.
  absl::Status ValidateBatch(const ModelBatch& batch) const;

  // Whole forward: embedding, every layer, final norm, logits, loss.
  absl::StatusOr<LossResult> Forward(const ModelBatch& batch,
                                     CoreAttentionExecutor& attention,
                                     Activations& activations);
  // Whole backward from the loss; gradients are ACCUMULATED, the loss
  // gradient scaled by grad_scale (e.g. 1 / counted tokens of the global
  // batch, so micro-batches and ranks sum to the mean).
  absl::Status Backward(CoreAttentionExecutor& attention, Activations& activations,
                        float grad_scale);

  // The per-layer pieces (Forward/Backward call these in order).
  // EmbedForward takes a.batch (validated) to the backend first.
  absl::Status EmbedForward(Activations& a);
  absl::Status PreAttentionForward(int layer, Activations& a);
  absl::Status CoreAttentionForward(int layer, CoreAttentionExecutor& attention, Activations& a);
  absl::Status PostAttentionForward(int layer, Activations& a);
  absl::StatusOr<LossResult> HeadForward(Activations& a);

  absl::Status HeadBackward(Activations& a, float grad_scale);
  // Consumes a.d_x (gradient at the layer output); leaves a.d_o and
  // accumulates the residual gradient into a.d_x.
  absl::Status PostAttentionBackward(int layer, Activations& a);
  absl::Status CoreAttentionBackward(int layer, CoreAttentionExecutor& attention,
                                     Activations& a);
  absl::Status PreAttentionBackward(int layer, Activations& a);
  absl::Status EmbedBackward(Activations& a);

  // Core attention in two phases for ping-pong (`half` 0 or 1; see
  // CoreAttentionExecutor::StartForward): Start prepares the layer's output
  // buffers and hands the call to the executor; the executor's
  // Finish*(half) completes it. `a` must not change in between.
  absl::Status StartCoreAttentionForward(int layer, int half, CoreAttentionExecutor& attention,
                                         Activations& a);
  absl::Status StartCoreAttentionBackward(int layer, int half, CoreAttentionExecutor& attention,
                                          Activations& a);

 private:
  Transformer(const ModelConfig& config, std::shared_ptr<ModelOps> ops);
  // Uploads changed parameters to a device backend (and their bf16 shadow).
  absl::Status SyncParameters();
  // The matrix at `offset` of the parameters, and the gradient there, as
  // the kernels see them.
  WeightView Weight(int64_t offset) const;
  const float* Param(int64_t offset) const;
  float* Grad(int64_t offset);
  // `buffer` sized for `floats` fp32 values (reallocated only on a size
  // change), optionally zeroed.
  absl::Status Ensure(device::DeviceBuffer& buffer, int64_t floats, bool zero);
  // Floats of each backward scratch buffer (Activations::scratch_*): one
  // size for every use, rows·max(d_ff, d_model), so they are never
  // reallocated between layers and any of their uses fits.
  int64_t ScratchFloats(int64_t rows) const;
  AttentionInputs CoreAttentionInputs(int layer, const Activations& a) const;
  // Layer `layer`'s core-attention call over `a`, its output buffers sized.
  absl::StatusOr<AttentionForwardCall> ForwardCall(int layer, Activations& a);
  absl::StatusOr<AttentionBackwardCall> BackwardCall(int layer, Activations& a);

  ModelConfig config_;
  ParameterLayout layout_;
  std::shared_ptr<ModelOps> ops_;
  std::vector<float> parameters_;
  std::vector<float> gradients_;
  // A device backend's copies (empty in place).
  device::DeviceBuffer device_parameters_, bf16_parameters_, device_gradients_;
  bool parameters_changed_ = true;
  // Set when the backend's parameters were updated there.
  bool host_parameters_stale_ = false;
  bool bf16_stale_ = true;
};

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_TRANSFORMER_H_
