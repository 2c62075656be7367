#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_EMBEDDING_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_EMBEDDING_H_

#include <cstdint>

namespace corescape::kernels {

// out[row] = table[tokens[row]]. Token ids are validated by the caller.
void EmbeddingForward(const int32_t* tokens, const float* table, float* out,
                      int64_t rows, int64_t dim);

// d_table[tokens[row]] += d_out[row], rows in order (deterministic).
void EmbeddingBackward(const int32_t* tokens, const float* d_out, float* d_table,
                       int64_t rows, int64_t dim);

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_EMBEDDING_H_
