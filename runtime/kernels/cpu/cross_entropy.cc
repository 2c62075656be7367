#include "runtime/kernels/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace corescape::kernels {

CrossEntropyResult CrossEntropy(const float* logits, const int32_t* targets,
                                int64_t rows, int64_t vocab, float* d_logits,
                                float grad_scale) {
  CrossEntropyResult result;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * vocab;
    float* dz = d_logits ? d_logits + r * vocab : nullptr;
    if (targets[r] < 0) {
      if (dz) std::memset(dz, 0, vocab * sizeof(float));
      continue;
    }
    const float max = *std::max_element(z, z + vocab);
    double sum = 0.0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(z[i] - max));
    const double log_sum = std::log(sum) + max;
    result.loss_sum += log_sum - z[targets[r]];
    ++result.tokens;
    if (dz) {
      for (int64_t i = 0; i < vocab; ++i) {
        dz[i] = static_cast<float>(std::exp(z[i] - log_sum)) * grad_scale;
      }
      dz[targets[r]] -= grad_scale;
    }
  }
  return result;
}

}  // namespace corescape::kernels
