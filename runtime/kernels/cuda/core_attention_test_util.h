#ifndef CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_TEST_UTIL_H_
#define CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_TEST_UTIL_H_

// What the core-attention tests of this directory compare (the five
// outputs of a forward and backward) and the sides they share: the
// double-precision reference, the tensor-core algorithm on the host, bf16
// inputs. Failures are reported as gtest failures.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cpu/attention_test_util.h"

namespace corescape::kernels::cuda {

struct AttentionOutputs {
  std::vector<float> o, lse, d_q, d_k, d_v;
};

// o, lse and d_q zero; d_k and d_v (which accumulate) from initial_kv_grad,
// zero when it is empty.
AttentionOutputs InitialOutputs(const AttentionBatch& b, const std::vector<float>& initial_kv_grad = {});

AttentionOutputs RunReference(const AttentionBatch& b, const std::vector<float>& initial_kv_grad = {});

// HostMmaAttentionForward/Backward over b's plan, b's inputs as bf16.
AttentionOutputs RunHostMma(const AttentionBatch& b, const std::vector<float>& initial_kv_grad = {});

// EXPECTs every tensor of got within `tolerance` of want, relative
// (RelativeError), naming `what` and the tensor.
void ExpectNear(const AttentionOutputs& got, const AttentionOutputs& want, double tolerance,
                const std::string& what);

std::vector<uint16_t> ToBf16(const std::vector<float>& x);

// b's q, k, v and d_o rounded to bf16 in place, so every side reads the
// values the bf16 path sees.
void RoundInputsToBf16(AttentionBatch& b);

// Documents of 1 to 300 tokens that cross the kernels' blocks (32 and 64)
// and 64-row tiles unevenly: a single token, a middle range and the end, a
// whole document, a mirrored head/tail pair, the last token of a 65-token
// document; then 4 random documents of up to max_length tokens.
std::vector<DocumentPieces> TileCrossingDocuments(std::mt19937_64& rng, int64_t max_length = 200);

// d_k/d_v to start from: random normal, the same for the same shape.
std::vector<float> RandomKvGrad(const AttentionBatch& b);

// softmax_scale 1/√head_dim.
AttentionShape ScaledShape(int n_heads, int n_kv_heads, int head_dim);

}  // namespace corescape::kernels::cuda

#endif  // CORESCAPE_RUNTIME_KERNELS_CUDA_CORE_ATTENTION_TEST_UTIL_H_
