#include "runtime/control/model_spec.h"

namespace corescape {

absl::StatusOr<model::ModelConfig> ModelConfigFromSpec(const v1::ModelSpec& m) {
  auto preset = model::PresetConfig(m.preset());
  if (!preset.ok()) return preset.status();
  model::ModelConfig config = *preset;
  if (m.n_layers()) config.n_layers = m.n_layers();
  if (m.d_model()) config.d_model = m.d_model();
  if (m.n_heads()) config.n_heads = m.n_heads();
  if (m.n_kv_heads()) config.n_kv_heads = m.n_kv_heads();
  if (m.d_ff()) config.d_ff = m.d_ff();
  if (m.vocab_size()) config.vocab_size = m.vocab_size();
  if (m.max_seq_len()) config.max_seq_len = m.max_seq_len();
  if (m.rope_theta() > 0) config.rope_theta = m.rope_theta();
  if (m.norm_eps() > 0) config.norm_eps = m.norm_eps();
  if (m.tie_embeddings()) config.tie_embeddings = true;
  return config;
}

}  // namespace corescape
