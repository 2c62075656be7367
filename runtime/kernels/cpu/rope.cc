#include "runtime/kernels/cpu/rope.h"

#include <cmath>
#include <vector>

namespace corescape::kernels {
namespace {

void Rotate(float* x, const int32_t* positions, int64_t rows, int heads,
            int head_dim, double theta, double direction) {
  const int pairs = head_dim / 2;
  std::vector<double> inverse_frequency(pairs);
  for (int i = 0; i < pairs; ++i) {
    inverse_frequency[i] = std::pow(theta, -2.0 * i / head_dim);
  }
  std::vector<float> cosines(pairs), sines(pairs);
  for (int64_t r = 0; r < rows; ++r) {
    // Angles in double: positions reach 10^5+ and float loses the phase.
    for (int i = 0; i < pairs; ++i) {
      const double angle = direction * positions[r] * inverse_frequency[i];
      cosines[i] = static_cast<float>(std::cos(angle));
      sines[i] = static_cast<float>(std::sin(angle));
    }
    for (int h = 0; h < heads; ++h) {
      float* v = x + (r * heads + h) * head_dim;
      for (int i = 0; i < pairs; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cosines[i] - b * sines[i];
        v[2 * i + 1] = a * sines[i] + b * cosines[i];
      }
    }
  }
}

}  // namespace

void RopeForward(float* x, const int32_t* positions, int64_t rows, int heads,
                 int head_dim, double theta) {
  Rotate(x, positions, rows, heads, head_dim, theta, 1.0);
}

void RopeBackward(float* dx, const int32_t* positions, int64_t rows, int heads,
                  int head_dim, double theta) {
  Rotate(dx, positions, rows, heads, head_dim, theta, -1.0);
}

}  // namespace corescape::kernels
