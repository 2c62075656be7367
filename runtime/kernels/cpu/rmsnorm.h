#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_RMSNORM_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_RMSNORM_H_

#include <cstdint>

namespace corescape::kernels {

// y = x / sqrt(mean(x²) + eps) * weight, per row of `dim`. rstd[row] keeps
// 1/sqrt(mean(x²) + eps) for the backward pass.
void RmsNormForward(const float* x, const float* weight, float* y, float* rstd,
                    int64_t rows, int64_t dim, float eps);

// dx (+)= ∂L/∂x (accumulated into dx: the residual stream's gradient);
// dweight += ∂L/∂weight.
void RmsNormBackward(const float* x, const float* weight, const float* rstd,
                     const float* dy, float* dx, float* dweight, int64_t rows,
                     int64_t dim);

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_RMSNORM_H_
