#ifndef CORESCAPE_RUNTIME_OPTIM_ADAMW_H_
#define CORESCAPE_RUNTIME_OPTIM_ADAMW_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/kernels/cuda/optim_updates.h"
#include "runtime/optim/adam_config.h"

namespace corescape::optim {

// AdamW (Loshchilov & Hutter) over one flat parameter buffer, exactly as
// torch.optim.AdamW computes it: decoupled decay θ ← θ(1 − ηλ), bias-corrected
// moments. `decay_mask[i]` selects the entries that decay (matrices, not
// norm gains).
class AdamW {
 public:
  AdamW(AdamWConfig config, std::vector<uint8_t> decay_mask);

  // One step with learning rate `lr` on params using grads.
  absl::Status Step(float* params, const float* grads, int64_t size, double lr);

  int64_t step_count() const { return step_; }
  std::vector<float>& first_moment() { return m_; }
  std::vector<float>& second_moment() { return v_; }
  const std::vector<float>& first_moment() const { return m_; }
  const std::vector<float>& second_moment() const { return v_; }
  void set_step_count(int64_t step) { step_ = step; }

 private:
  AdamWConfig config_;
  std::vector<uint8_t> decay_mask_;
  std::vector<float> m_, v_;
  int64_t step_ = 0;
};

// The update over n coordinates with one step's scalars
// (optim::AdamWScalarsAt): the body a GPU launch runs, on the host.
void AdamWElements(float* params, float* m, float* v, const float* grads, const uint8_t* decays,
                   int64_t n, const kernels::host_device::AdamWScalars& scalars);

// Scales grads so their global L2 norm is at most max_norm (no-op when
// max_norm <= 0). Returns the norm before clipping.
double ClipGradientNorm(float* grads, int64_t size, double max_norm);

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_ADAMW_H_
