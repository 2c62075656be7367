#include "runtime/kernels/cpu/rmsnorm.h"

#include <cmath>

namespace corescape::kernels {

void RmsNormForward(const float* x, const float* weight, float* y, float* rstd,
                    int64_t rows, int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    float sum_squares = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum_squares += xr[i] * xr[i];
    const float s = 1.0f / std::sqrt(sum_squares / dim + eps);
    rstd[r] = s;
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * s * weight[i];
  }
}

void RmsNormBackward(const float* x, const float* weight, const float* rstd,
                     const float* dy, float* dx, float* dweight, int64_t rows,
                     int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* dyr = dy + r * dim;
    float* dxr = dx + r * dim;
    const float s = rstd[r];
    // y_i = x_i s w_i;  ∂L/∂x_j = s w_j dy_j − s³ x_j / dim · Σ_i dy_i w_i x_i
    float dot = 0.0f;
    for (int64_t i = 0; i < dim; ++i) {
      dot += dyr[i] * weight[i] * xr[i];
      dweight[i] += dyr[i] * xr[i] * s;
    }
    const float c = s * s * s * dot / dim;
    for (int64_t i = 0; i < dim; ++i) dxr[i] += s * weight[i] * dyr[i] - c * xr[i];
  }
}

}  // namespace corescape::kernels
