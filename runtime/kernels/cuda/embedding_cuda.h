#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_EMBEDDING_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_EMBEDDING_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace corescape::kernels::cuda {

// As EmbeddingForward / EmbeddingBackward (runtime/kernels/cpu/embedding.h);
// token ids validated by the caller.
absl::Status LaunchEmbeddingForward(const int32_t* tokens, const float* table, float* out, int64_t rows,
                                    int64_t dim, cudaStream_t stream);
absl::Status LaunchEmbeddingBackward(const int32_t* tokens, const float* d_out, float* d_table, int64_t rows,
                                     int64_t dim, cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_EMBEDDING_CUDA_H_
