#include "runtime/model/model_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace corescape::model {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("model.", field, ": ", why));
}

ModelConfig Make(int n_layers, int d_model, int n_heads, int n_kv_heads, int d_ff,
                 int vocab_size, int max_seq_len, bool tie) {
  ModelConfig config;
  config.n_layers = n_layers;
  config.d_model = d_model;
  config.n_heads = n_heads;
  config.n_kv_heads = n_kv_heads;
  config.d_ff = d_ff;
  config.vocab_size = vocab_size;
  config.max_seq_len = max_seq_len;
  config.tie_embeddings = tie;
  return config;
}

}  // namespace

absl::Status ModelConfig::Validate() const {
  auto positive = [](absl::string_view field, int64_t value, int64_t max) -> absl::Status {
    if (value <= 0) return Invalid(field, absl::StrCat("must be positive, got ", value));
    if (value > max) return Invalid(field, absl::StrCat("must be at most ", max, ", got ", value));
    return absl::OkStatus();
  };
  if (auto s = positive("n_layers", n_layers, kMaxLayers); !s.ok()) return s;
  if (auto s = positive("d_model", d_model, kMaxDModel); !s.ok()) return s;
  if (auto s = positive("n_heads", n_heads, kMaxHeads); !s.ok()) return s;
  if (auto s = positive("n_kv_heads", n_kv_heads, kMaxHeads); !s.ok()) return s;
  if (auto s = positive("d_ff", d_ff, kMaxFeedForward); !s.ok()) return s;
  if (auto s = positive("vocab_size", vocab_size, kMaxVocabSize); !s.ok()) return s;
  if (auto s = positive("max_seq_len", max_seq_len, kMaxSequenceLength); !s.ok()) return s;
  if (d_model % n_heads != 0) {
    return Invalid("n_heads", absl::StrCat("must divide d_model ", d_model, ", got ", n_heads));
  }
  if (n_heads % n_kv_heads != 0) {
    return Invalid("n_kv_heads",
                   absl::StrCat("must divide n_heads ", n_heads, ", got ", n_kv_heads));
  }
  if (head_dim() % 2 != 0) {
    return Invalid("n_heads", absl::StrCat("head_dim d_model/n_heads = ", head_dim(),
                                           " must be even for rotary embedding"));
  }
  // Written so that NaN fails too.
  if (!(rope_theta > 1.0 && std::isfinite(rope_theta))) {
    return Invalid("rope_theta", absl::StrCat("must be finite and > 1, got ", rope_theta));
  }
  if (!(norm_eps > 0.0 && norm_eps < 1.0)) {
    return Invalid("norm_eps", absl::StrCat("must be in (0, 1), got ", norm_eps));
  }
  return absl::OkStatus();
}

int64_t ModelConfig::ParameterCount() const {
  const int64_t d = d_model;
  const int64_t per_layer = d                          // attention norm
                            + d * q_width()            // wq
                            + 2 * d * kv_width()       // wk, wv
                            + int64_t{q_width()} * d   // wo
                            + d                        // mlp norm
                            + 3 * d * d_ff;            // gate, up, down
  return int64_t{vocab_size} * d                       // token embedding
         + n_layers * per_layer + d                    // final norm
         + (tie_embeddings ? 0 : int64_t{vocab_size} * d);
}

std::string ModelConfig::ToString() const {
  return absl::StrFormat(
      "layers=%d d_model=%d heads=%d kv_heads=%d d_ff=%d vocab=%d max_seq=%d "
      "rope_theta=%g tie=%d params=%d",
      n_layers, d_model, n_heads, n_kv_heads, d_ff, vocab_size, max_seq_len,
      rope_theta, tie_embeddings, ParameterCount());
}

absl::StatusOr<ModelConfig> PresetConfig(absl::string_view name) {
  if (name == "tiny") return Make(3, 96, 4, 2, 256, 259, 256, false);
  if (name == "mini") return Make(4, 256, 8, 4, 704, 259, 256, false);
  if (name == "small") return Make(7, 512, 8, 4, 1408, 259, 1024, false);
  // The SCAPE authors' script shapes. GPT-345M in our Llama-style block:
  // GPT-2's BPE vocabulary, tied embeddings, and a SwiGLU of 2752 (2/3 of
  // GPT-2's 4·1024 GELU MLP, rounded to 64) for about the same parameters.
  if (name == "gpt-345m") return Make(24, 1024, 16, 16, 2752, 50257, 1024, true);
  if (name == "llama-500m") return Make(16, 1536, 16, 8, 4096, 32000, 4096, false);
  if (name == "llama-1.8b") return Make(24, 2560, 32, 8, 6912, 128256, 2048, false);
  return absl::InvalidArgumentError(absl::StrCat(
      "model.preset: unknown preset '", name, "' (known: ",
      absl::StrJoin(PresetNames(), ", "), ")"));
}

std::vector<std::string> PresetNames() {
  return {"tiny", "mini", "small", "gpt-345m", "llama-500m", "llama-1.8b"};
}

}  // namespace corescape::model
