#include "runtime/kernels/cpu/embedding.h"

#include <cstring>

namespace corescape::kernels {

void EmbeddingForward(const int32_t* tokens, const float* table, float* out,
                      int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out + r * dim, table + int64_t{tokens[r]} * dim, dim * sizeof(float));
  }
}

void EmbeddingBackward(const int32_t* tokens, const float* d_out, float* d_table,
                       int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = d_table + int64_t{tokens[r]} * dim;
    const float* g = d_out + r * dim;
    for (int64_t i = 0; i < dim; ++i) row[i] += g[i];
  }
}

}  // namespace corescape::kernels
