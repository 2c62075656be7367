#include "runtime/model/parameter_layout.h"

#include "absl/strings/str_cat.h"

namespace corescape::model {

int64_t ParameterLayout::Add(std::string name, std::vector<int64_t> shape) {
  TensorSlot slot;
  slot.name = std::move(name);
  slot.offset = total_size_;
  slot.size = 1;
  for (int64_t d : shape) slot.size *= d;
  slot.is_matrix = shape.size() == 2;
  slot.shape = std::move(shape);
  total_size_ += slot.size;
  tensors_.push_back(std::move(slot));
  return tensors_.back().offset;
}

ParameterLayout::ParameterLayout(const ModelConfig& config) {
  const int64_t d = config.d_model;
  token_embedding_ = Add("tok_embeddings.weight", {config.vocab_size, d});
  for (int i = 0; i < config.n_layers; ++i) {
    const std::string prefix = absl::StrCat("layers.", i, ".");
    LayerSlots slots;
    slots.attention_norm = Add(prefix + "attention_norm.weight", {d});
    slots.wq = Add(prefix + "attention.wq.weight", {config.q_width(), d});
    slots.wk = Add(prefix + "attention.wk.weight", {config.kv_width(), d});
    slots.wv = Add(prefix + "attention.wv.weight", {config.kv_width(), d});
    slots.wo = Add(prefix + "attention.wo.weight", {d, config.q_width()});
    slots.ffn_norm = Add(prefix + "ffn_norm.weight", {d});
    slots.w_gate = Add(prefix + "feed_forward.w1.weight", {config.d_ff, d});
    slots.w_up = Add(prefix + "feed_forward.w3.weight", {config.d_ff, d});
    slots.w_down = Add(prefix + "feed_forward.w2.weight", {d, config.d_ff});
    layers_.push_back(slots);
  }
  final_norm_ = Add("norm.weight", {d});
  lm_head_ = config.tie_embeddings ? token_embedding_
                                   : Add("output.weight", {config.vocab_size, d});
}

std::vector<int64_t> ParameterLayout::TensorBounds() const {
  std::vector<int64_t> bounds;
  for (const TensorSlot& slot : tensors_) bounds.push_back(slot.offset);
  bounds.push_back(total_size_);
  return bounds;
}

}  // namespace corescape::model
