#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_CROSS_ENTROPY_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_CROSS_ENTROPY_H_

#include <cstdint>

namespace corescape::kernels {

// Softmax cross-entropy of logits[rows, vocab] against targets (−1 =
// ignore). Returns the SUM of per-token losses and the number of counted
// tokens; if d_logits is given, writes (softmax − onehot) · grad_scale for
// counted rows and 0 for ignored ones (the caller picks grad_scale, e.g.
// 1/tokens of the whole global batch).
struct CrossEntropyResult {
  double loss_sum = 0.0;
  int64_t tokens = 0;
};

CrossEntropyResult CrossEntropy(const float* logits, const int32_t* targets,
                                int64_t rows, int64_t vocab, float* d_logits,
                                float grad_scale);

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_CROSS_ENTROPY_H_
