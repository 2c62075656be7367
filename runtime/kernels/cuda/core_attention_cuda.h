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
// The Bf16 launches run on tensor cores (core_attention_mma.h): q, k, v
// and d_o as bf16 bit patterns (casts.h), every product a bf16 MMA with
// fp32 accumulation, P and dS rounded to bf16 before theirs; o, lse, delta
// and the gradients fp32. Same grids, tiles and waves as the fp32 launches,
// 128 threads per block (4 warps of 16 rows); also no atomics, so also
// bitwise reproducible. About 1e-3 from the exact result where the fp32
// launches are 1e-6 away.
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
