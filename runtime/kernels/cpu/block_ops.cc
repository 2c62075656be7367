#include "runtime/kernels/cpu/block_ops.h"

#include <cblas.h>

namespace corescape::kernels::cpu {

void Gemm(bool a_t, bool b_t, int m, int n, int k, float alpha, const float* a,
          int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, a_t ? CblasTrans : CblasNoTrans,
              b_t ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

}  // namespace corescape::kernels::cpu
