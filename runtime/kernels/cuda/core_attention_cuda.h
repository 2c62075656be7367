#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_CUDA_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/kernels/cuda/core_attention.h"

namespace corescape::kernels::cuda {

// As CoreAttentionForward / CoreAttentionBackward
// (runtime/kernels/core_attention.h) on device buffers, fp32, for the tasks
// a CoreAttentionTiles was planned from (upload it with
// UploadCoreAttentionTiles). Forward: one block of kAttentionQueryTile
// threads per (query tile, head), a thread per query row, K/V blocks staged
// in shared memory. Backward: the same grid for D and dQ (d_q overwritten,
// delta[q_rows, n_heads] is scratch it fills), then per wave one block of
// kAttentionKeyTile threads per (key tile, kv head), a thread per key row,
// Q/dO blocks staged in shared memory, ADDING to d_k and d_v. No atomics:
// the results are bitwise reproducible.
//
// The Bf16 launches take q, k, v and d_o as bf16 bit patterns (casts.h),
// widen them exactly on load and do everything else as the fp32 ones; o,
// lse and the gradients stay fp32.
absl::Status LaunchCoreAttentionForward(const CoreAttentionTilesView& tiles, const float* q, const float* k,
                                        const float* v, float* o, float* lse, cudaStream_t stream);
absl::Status LaunchCoreAttentionBackward(const CoreAttentionTilesView& tiles, const float* q, const float* k,
                                         const float* v, const float* o, const float* lse, const float* d_o,
                                         float* delta, float* d_q, float* d_k, float* d_v, cudaStream_t stream);
absl::Status LaunchCoreAttentionForwardBf16(const CoreAttentionTilesView& tiles, const uint16_t* q,
                                            const uint16_t* k, const uint16_t* v, float* o, float* lse,
                                            cudaStream_t stream);
absl::Status LaunchCoreAttentionBackwardBf16(const CoreAttentionTilesView& tiles, const uint16_t* q,
                                             const uint16_t* k, const uint16_t* v, const float* o, const float* lse,
                                             const uint16_t* d_o, float* delta, float* d_q, float* d_k, float* d_v,
                                             cudaStream_t stream);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_CUDA_H_
