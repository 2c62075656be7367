#include "runtime/kernels/cpu/linear.h"

#include <cblas.h>

namespace corescape::kernels {

void LinearForward(const float* x, const float* w, float* y, int64_t m, int64_t k,
                   int64_t n) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k,
              0.0f, y, n);
}

void LinearBackward(const float* x, const float* w, const float* dy, float* dx,
                    float* dw, int64_t m, int64_t k, int64_t n) {
  if (dx != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, n, 1.0f, dy, n, w, k,
                0.0f, dx, k);
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f, dy, n, x, k,
              1.0f, dw, k);
}

}  // namespace corescape::kernels
