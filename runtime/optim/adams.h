#ifndef CORESCAPE_RUNTIME_OPTIM_ADAMS_H_
#define CORESCAPE_RUNTIME_OPTIM_ADAMS_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/optim/adam_config.h"

namespace corescape::optim {

// One AdamS coordinate update (Zhang, Wang, Chen; arXiv 2505.16363):
//   v = β2·m_prev² + (1−β2)·g²     (the PREVIOUS first moment: no second-moment state)
//   m ← β1·m + (1−β1)·g
//   θ ← θ − η·(m/(√v+ε) + λ·θ)     (no bias correction)
// `decay` is 1 − ηλ for decaying entries and 1 otherwise; the decay uses θ
// before the step, so applying it first is the same update. Shared by the
// dense optimizer and SCAPE so density 1.0 runs the same float operations.
inline void AdamSUpdate(float& theta, float& m, float g, float beta1, float beta2, float eps,
                        float lr, float decay) {
  const float v = beta2 * m * m + (1.0f - beta2) * g * g;
  m = beta1 * m + (1.0f - beta1) * g;
  theta *= decay;
  theta -= lr * m / (std::sqrt(v) + eps);
}

// AdamSUpdate over n coordinates with one step's scalars
// (optim::AdamSScalarsAt): the body a GPU launch runs, on the host.
void AdamSElements(float* params, float* m, const float* grads, const uint8_t* decays, int64_t n,
                   const kernels::host_device::AdamSScalars& scalars);

// Dense AdamS over one flat parameter buffer. `decay_mask[i]` selects the
// entries that decay (matrices, not norm gains), as in AdamW.
class AdamS {
 public:
  AdamS(AdamSConfig config, std::vector<uint8_t> decay_mask);

  // One step with learning rate `lr` on params using grads.
  absl::Status Step(float* params, const float* grads, int64_t size, double lr);

  int64_t step_count() const { return step_; }
  void set_step_count(int64_t step) { step_ = step; }
  std::vector<float>& first_moment() { return m_; }
  const std::vector<float>& first_moment() const { return m_; }
  const AdamSConfig& config() const { return config_; }

 private:
  AdamSConfig config_;
  std::vector<uint8_t> decay_mask_;
  std::vector<float> m_;
  int64_t step_ = 0;
};

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_ADAMS_H_
