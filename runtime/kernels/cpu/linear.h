#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_LINEAR_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_LINEAR_H_

#include <cstdint>

namespace corescape::kernels {

// y[m, n] = x[m, k] · w[n, k]^T  (torch.nn.Linear weight layout), via sgemm.
void LinearForward(const float* x, const float* w, float* y, int64_t m, int64_t k,
                   int64_t n);

// dx[m, k] = dy[m, n] · w[n, k]   (overwritten; skipped when dx is null)
// dw[n, k] += dy^T · x            (accumulated: gradients sum over micro-batches)
void LinearBackward(const float* x, const float* w, const float* dy, float* dx,
                    float* dw, int64_t m, int64_t k, int64_t n);

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_LINEAR_H_
