#include "runtime/comm/reduce_kernels.h"

#include <cstring>

namespace corescape::comm {
namespace {

// Four floats per operation (one SSE register, the x86-64 baseline) through
// GCC/Clang vector extensions: -O2's cheap vectoriser leaves plain loops
// scalar when `out` may alias an input (it adds no runtime overlap check),
// so the loop is written in vectors. Lane-wise + and / round exactly like
// the scalar operations: the vector body and the scalar tail give the bits
// a naive loop gives.
using Lanes = float __attribute__((vector_size(16)));
constexpr int64_t kLanes = sizeof(Lanes) / sizeof(float);

inline Lanes Load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}
inline void Store(float* p, Lanes v) { std::memcpy(p, &v, sizeof v); }

// out[i] = op(first[i], second[i]). Each step loads all its operands before
// it stores, so `out` may be exactly `first` or `second`.
template <typename Op>
void Elementwise(const float* first, const float* second, float* out, int64_t n, Op op) {
  int64_t i = 0;
  constexpr int64_t kStep = 4 * kLanes;
  for (; i + kStep <= n; i += kStep) {
    const Lanes a0 = Load(first + i), a1 = Load(first + i + kLanes),
                a2 = Load(first + i + 2 * kLanes), a3 = Load(first + i + 3 * kLanes);
    const Lanes b0 = Load(second + i), b1 = Load(second + i + kLanes),
                b2 = Load(second + i + 2 * kLanes), b3 = Load(second + i + 3 * kLanes);
    Store(out + i, op(a0, b0));
    Store(out + i + kLanes, op(a1, b1));
    Store(out + i + 2 * kLanes, op(a2, b2));
    Store(out + i + 3 * kLanes, op(a3, b3));
  }
  for (; i < n; ++i) out[i] = op(first[i], second[i]);
}

}  // namespace

void AddFloats(const float* first, const float* second, float* out, int64_t n) {
  Elementwise(first, second, out, n, [](auto a, auto b) { return a + b; });
}

void AddThenDivideFloats(const float* first, const float* second, float* out,
                         int64_t n, float divisor) {
  Elementwise(first, second, out, n, [divisor](auto a, auto b) { return (a + b) / divisor; });
}

void DivideFloats(float* data, int64_t n, float divisor) {
  Elementwise(data, data, data, n, [divisor](auto a, auto) { return a / divisor; });
}

}  // namespace corescape::comm
