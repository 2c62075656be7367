#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_MMA_HOST_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_MMA_HOST_H_

// The tensor-core launches' algorithm (core_attention_mma.cu) on the host:
// the same tiles, blocks, padding, bodies (core_attention_mma.h) and bf16
// roundings, with each MMA's products summed in fp32 in index order. The
// tests hold it to the double-precision reference (CI) and the launches to
// it (device). Arguments as LaunchCoreAttentionForwardBf16 /
// LaunchCoreAttentionBackwardBf16 on host memory, for a host plan.
#include <cstdint>

#include "runtime/kernels/cuda/core_attention_tiles.h"

namespace corescape::kernels::cuda {

// ||got − want|| / ||want|| per tensor the MMA path is held to against the
// double-precision reference on the same bf16 inputs. P and dS are rounded
// to bf16 (relative 2^-9) before their products, which leaves errors of 1e-3
// to 3e-3 on the tests' batches; a key dropped from each softmax moves O by
// 3e-2 or more (core_attention_mma_test's WrongMasksAreCaught).
inline constexpr double kMmaAttentionTolerance = 6e-3;

void HostMmaAttentionForward(const CoreAttentionTiles& plan, const uint16_t* q, const uint16_t* k,
                             const uint16_t* v, float* o, float* lse);

void HostMmaAttentionBackward(const CoreAttentionTiles& plan, const uint16_t* q, const uint16_t* k,
                              const uint16_t* v, const float* o, const float* lse, const uint16_t* d_o,
                              float* delta, float* d_q, float* d_k, float* d_v);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_MMA_HOST_H_
