#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_RMSNORM_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_RMSNORM_H_

// Row bodies of runtime/kernels/cpu/rmsnorm.cc, same operation order.
// y = x·s·w with s = 1/√(mean(x²) + eps);
// ∂L/∂x_j = s·w_j·dy_j − s³·x_j/dim · Σ_i dy_i·w_i·x_i;  ∂L/∂w_i = Σ_rows dy_i·x_i·s.
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

// The row's pieces, so a launch may spread a row over a block (its sums
// then run in another order): s from Σx², y_i; c from Σ dy_i·w_i·x_i, and
// dx_i's increment.
CORESCAPE_HOST_DEVICE float RmsNormScale(float sum_squares, int64_t dim, float eps) {
  return 1.0f / sqrtf(sum_squares / dim + eps);
}
CORESCAPE_HOST_DEVICE float RmsNormOutput(float x, float s, float w) { return x * s * w; }
CORESCAPE_HOST_DEVICE float RmsNormGradCoefficient(float s, float dot, int64_t dim) { return s * s * s * dot / dim; }
CORESCAPE_HOST_DEVICE float RmsNormInputGrad(float x, float w, float dy, float s, float c) {
  return s * w * dy - c * x;
}

// One row; returns s (kept as rstd for the backward pass).
CORESCAPE_HOST_DEVICE float RmsNormForwardRow(const float* xr, const float* weight, float* yr,
                                              int64_t dim, float eps) {
  float sum_squares = 0.0f;
  for (int64_t i = 0; i < dim; ++i) sum_squares += xr[i] * xr[i];
  const float s = RmsNormScale(sum_squares, dim, eps);
  for (int64_t i = 0; i < dim; ++i) yr[i] = RmsNormOutput(xr[i], s, weight[i]);
  return s;
}

// One row's dx (accumulated: the residual stream's gradient).
CORESCAPE_HOST_DEVICE void RmsNormBackwardRow(const float* xr, const float* weight, float s,
                                              const float* dyr, float* dxr, int64_t dim) {
  float dot = 0.0f;
  for (int64_t i = 0; i < dim; ++i) dot += dyr[i] * weight[i] * xr[i];
  const float c = RmsNormGradCoefficient(s, dot, dim);
  for (int64_t i = 0; i < dim; ++i) dxr[i] += RmsNormInputGrad(xr[i], weight[i], dyr[i], s, c);
}

// dweight[i] += over rows in order: the CPU's per-entry summation order.
// RmsNormWeightGradTerm is one row's term.
CORESCAPE_HOST_DEVICE float RmsNormWeightGradTerm(float dy, float x, float s) { return dy * x * s; }

CORESCAPE_HOST_DEVICE void RmsNormWeightGradColumn(const float* x, const float* rstd, const float* dy,
                                                   float* dweight, int64_t i, int64_t rows,
                                                   int64_t dim) {
  float acc = dweight[i];
  for (int64_t r = 0; r < rows; ++r) acc += RmsNormWeightGradTerm(dy[r * dim + i], x[r * dim + i], rstd[r]);
  dweight[i] = acc;
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_RMSNORM_H_
