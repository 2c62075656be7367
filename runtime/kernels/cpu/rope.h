#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_ROPE_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_ROPE_H_

#include <cstdint>

namespace corescape::kernels {

// Rotary position embedding, in place, on x[rows, heads, head_dim]: each
// adjacent pair (x[2i], x[2i+1]) of a head is rotated by positions[row] ·
// theta^(−2i/head_dim) (Meta Llama's interleaved convention). Positions are
// per token, so they restart at each document and continue across a split.
void RopeForward(float* x, const int32_t* positions, int64_t rows, int heads,
                 int head_dim, double theta);

// The transpose of the rotation (rotate by the negative angle), in place on
// the incoming gradient.
void RopeBackward(float* dx, const int32_t* positions, int64_t rows, int heads,
                  int head_dim, double theta);

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_ROPE_H_
