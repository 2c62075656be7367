#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_EMBEDDING_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_EMBEDDING_H_

// Bodies of runtime/kernels/cpu/embedding.cc. Token ids are validated by
// the caller, as there.
#include "runtime/kernels/cuda/host_device.h"

namespace corescape::kernels::cuda {

// out[row][i] = table[tokens[row]][i].
CORESCAPE_HOST_DEVICE void EmbeddingForwardElement(const int32_t* tokens, const float* table, float* out,
                                                   int64_t row, int64_t i, int64_t dim) {
  out[row * dim + i] = table[static_cast<int64_t>(tokens[row]) * dim + i];
}

// Column i of d_table += d_out over the rows, in order, whose token is in
// class `token_class` (token mod `classes`): per entry the CPU's summation
// order (the rows of one token all fall in one class), so columns and
// classes run in parallel without atomics, deterministically.
CORESCAPE_HOST_DEVICE void EmbeddingBackwardColumn(const int32_t* tokens, const float* d_out,
                                                   float* d_table, int64_t i, int64_t rows,
                                                   int64_t dim, int32_t token_class = 0,
                                                   int32_t classes = 1) {
  for (int64_t r = 0; r < rows; ++r) {
    if (tokens[r] % classes != token_class) continue;
    d_table[static_cast<int64_t>(tokens[r]) * dim + i] += d_out[r * dim + i];
  }
}

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_EMBEDDING_H_
