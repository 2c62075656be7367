#ifndef CORESCAPE_RUNTIME_MODEL_MODEL_CONFIG_H_
#define CORESCAPE_RUNTIME_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace corescape::model {

// The largest model shape anything accepts: Validate() refuses beyond these,
// and the attention wire format (runtime/attention/wire_format.h) bounds a
// peer's announced shape by them before allocating from it. Far above the
// paper-scale presets (llama-1.8b: 24 layers, d_model 2560, 32 heads).
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxDModel = 65536;  // also the widest attention row (heads × head_dim)
inline constexpr int kMaxHeads = 1024;
inline constexpr int kMaxFeedForward = 1 << 20;
inline constexpr int kMaxVocabSize = 1 << 22;
inline constexpr int kMaxSequenceLength = 1 << 22;
// Tokens in one rank's micro-batch (micro_batch_size × sequence_length):
// small enough that the planner's causal-pair costs, squares of lengths
// summed over a thousand ranks, stay inside int64.
inline constexpr int64_t kMaxMicroBatchTokens = int64_t{1} << 22;

// Shape of a decoder-only Llama-style transformer.
struct ModelConfig {
  int n_layers = 2;
  int d_model = 64;
  int n_heads = 4;
  int n_kv_heads = 2;    // grouped-query attention; divides n_heads
  int d_ff = 192;        // SwiGLU hidden width
  int vocab_size = 259;  // byte-level tokenizer: 256 bytes + 3 specials
  int max_seq_len = 256;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = false;

  int head_dim() const { return d_model / n_heads; }
  int q_width() const { return n_heads * head_dim(); }
  int kv_width() const { return n_kv_heads * head_dim(); }

  // INVALID_ARGUMENT naming the offending field.
  absl::Status Validate() const;
  int64_t ParameterCount() const;
  std::string ToString() const;
};

// Named presets: tiny (tests), mini (~3M, CPU studies), small (~20M,
// benchmarks), and the SCAPE authors' shapes gpt-345m, llama-500m,
// llama-1.8b (too big to train on a CPU). docs/model.md has the table.
absl::StatusOr<ModelConfig> PresetConfig(absl::string_view name);
std::vector<std::string> PresetNames();

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_MODEL_CONFIG_H_
