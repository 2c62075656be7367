#ifndef CORESCAPE_RUNTIME_KERNELS_CPU_ATTENTION_TEST_UTIL_H_
#define CORESCAPE_RUNTIME_KERNELS_CPU_ATTENTION_TEST_UTIL_H_

// Random variable-length task batches for core attention tests and benchmarks.

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "runtime/kernels/core_attention.h"

namespace corescape::kernels {

// One document and the query pieces [begin, end) it is cut into. Pieces need
// not cover the document.
struct DocumentPieces {
  int64_t length = 0;
  std::vector<std::pair<int64_t, int64_t>> pieces;
};

// Random documents of 1..max_length tokens, each whole, cut at random points
// (often isolating the first token, kv = 1, and the last, q = 1), cut into a
// DistCA mirrored head/tail pair [0, a), [L - a, L) with or without the
// middle, or with some pieces dropped.
std::vector<DocumentPieces> RandomDocuments(std::mt19937_64& rng,
                                            int documents, int64_t max_length);

struct AttentionBatch {
  AttentionShape shape;
  std::vector<AttentionTask> tasks;
  int64_t q_rows = 0;
  int64_t kv_rows = 0;
  std::vector<float> q, k, v, d_o;  // random normal inputs

  int64_t q_floats() const { return q_rows * shape.n_heads * shape.head_dim; }
  int64_t kv_floats() const {
    return kv_rows * shape.n_kv_heads * shape.head_dim;
  }
  int64_t lse_floats() const { return q_rows * shape.n_heads; }
};

// Lays documents out in K/V rows one after another, and the pieces' query
// rows in a shuffled order, both with random unused rows in between.
AttentionBatch MakeBatch(const AttentionShape& shape,
                         const std::vector<DocumentPieces>& documents,
                         std::mt19937_64& rng);

// ||actual - expected|| / ||expected|| (0 when both are 0).
double RelativeError(absl::Span<const float> actual,
                     absl::Span<const float> expected);

}  // namespace corescape::kernels

#endif  // CORESCAPE_RUNTIME_KERNELS_CPU_ATTENTION_TEST_UTIL_H_
