#ifndef CORESCAPE_RUNTIME_COMM_REDUCE_KERNELS_H_
#define CORESCAPE_RUNTIME_COMM_REDUCE_KERNELS_H_

#include <cstdint>

namespace corescape::comm {

// Element-wise fp32 arithmetic for the CPU collectives. Operand order is
// explicit (first + second) because rounding, and which NaN payload wins,
// depend on it; callers fix the order by rank so every rank gets the same
// bits. `out` may alias either input.
void AddFloats(const float* first, const float* second, float* out, int64_t n);
// out = (first + second) / divisor: the last addition of a mean, fused.
void AddThenDivideFloats(const float* first, const float* second, float* out,
                         int64_t n, float divisor);
void DivideFloats(float* data, int64_t n, float divisor);

}  // namespace corescape::comm

#endif  // CORESCAPE_RUNTIME_COMM_REDUCE_KERNELS_H_
