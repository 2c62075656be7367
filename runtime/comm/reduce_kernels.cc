#include "runtime/comm/reduce_kernels.h"

namespace corescape::comm {

// Plain loops: gcc vectorises them at -O2; no FMA contraction can occur
// (one operation per element), so results do not depend on the build.
void AddFloats(const float* first, const float* second, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = first[i] + second[i];
}

void AddThenDivideFloats(const float* first, const float* second, float* out,
                         int64_t n, float divisor) {
  for (int64_t i = 0; i < n; ++i) out[i] = (first[i] + second[i]) / divisor;
}

void DivideFloats(float* data, int64_t n, float divisor) {
  for (int64_t i = 0; i < n; ++i) data[i] /= divisor;
}

}  // namespace corescape::comm
