#ifndef CORESCAPE_RUNTIME_MODEL_PARAMETER_LAYOUT_H_
#define CORESCAPE_RUNTIME_MODEL_PARAMETER_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/model_config.h"

namespace corescape::model {

// One tensor inside the flat parameter (or gradient) buffer.
struct TensorSlot {
  std::string name;            // PyTorch-style, e.g. "layers.0.attention.wq.weight"
  int64_t offset = 0;          // in floats
  std::vector<int64_t> shape;  // Linear weights are [out, in], as in torch.nn.Linear
  int64_t size = 0;
  bool is_matrix = false;      // weight decay applies to matrices only
};

struct LayerSlots {
  int64_t attention_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
};

// Where every parameter lives in the ONE contiguous fp32 buffer: the
// optimizer partitions, masks and communicates that buffer as a whole, and
// checkpoints write it in one piece. Gradients use the same layout.
class ParameterLayout {
 public:
  explicit ParameterLayout(const ModelConfig& config);

  int64_t total_size() const { return total_size_; }
  const std::vector<TensorSlot>& tensors() const { return tensors_; }
  // The T + 1 offsets of the tensors in the buffer, 0 to total_size(): what
  // per-tensor optimizer masks are cut along.
  std::vector<int64_t> TensorBounds() const;
  int64_t token_embedding() const { return token_embedding_; }
  int64_t final_norm() const { return final_norm_; }
  // Equals token_embedding() when embeddings are tied.
  int64_t lm_head() const { return lm_head_; }
  const LayerSlots& layer(int i) const { return layers_[i]; }

 private:
  int64_t Add(std::string name, std::vector<int64_t> shape);

  int64_t total_size_ = 0;
  std::vector<TensorSlot> tensors_;
  int64_t token_embedding_ = 0;
  int64_t final_norm_ = 0;
  int64_t lm_head_ = 0;
  std::vector<LayerSlots> layers_;
};

}  // namespace corescape::model

#endif  // CORESCAPE_RUNTIME_MODEL_PARAMETER_LAYOUT_H_
