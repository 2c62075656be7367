// The tensor-core launches' algorithm, run on the host with their bodies
// (core_attention_mma_host), vs the double-precision reference on the same
// bf16 inputs, within kMmaAttentionTolerance (core_attention_mma_host.h).
#include "runtime/kernels/cuda/core_attention_mma.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cpu/attention_test_util.h"
#include "runtime/kernels/cuda/core_attention_mma_host.h"
#include "runtime/kernels/cuda/core_attention_test_util.h"

namespace corescape::kernels::cuda {
namespace {

AttentionBatch Bf16Batch(const AttentionShape& shape, const std::vector<DocumentPieces>& docs, std::mt19937_64& rng) {
  AttentionBatch b = MakeBatch(shape, docs, rng);
  RoundInputsToBf16(b);
  return b;
}

TEST(CoreAttentionMma, HostAlgorithmMatchesTheReferenceAcrossGqaGroupsAndHeadDims) {
  // 16, 20, 48 and 80 pad to 32, 32, 64 and 96 columns; 64, 96 and 128
  // fill theirs.
  for (int head_dim : {16, 20, 48, 64, 80, 96, 128}) {
    for (int group : {1, 4}) {
      std::mt19937_64 rng(head_dim * 10 + group);
      const AttentionBatch b = Bf16Batch(ScaledShape(4, 4 / group, head_dim), TileCrossingDocuments(rng), rng);
      const std::vector<float> kv_grad = RandomKvGrad(b);
      ExpectNear(RunHostMma(b, kv_grad), RunReference(b, kv_grad), kMmaAttentionTolerance,
                 "head_dim " + std::to_string(head_dim) + ", group " + std::to_string(group));
    }
  }
}

// Long documents: many key blocks per query tile (the online rescale) and
// many query blocks per key tile.
TEST(CoreAttentionMma, HostAlgorithmMatchesTheReferenceOnLongDocuments) {
  std::mt19937_64 rng(3);
  const AttentionBatch b =
      Bf16Batch(ScaledShape(2, 1, 64), {{1200, {{0, 1200}}}, {900, {{0, 300}, {600, 900}}}}, rng);
  ExpectNear(RunHostMma(b), RunReference(b), kMmaAttentionTolerance, "long");
}

// Large scores: softmax rows dominated by a few keys, where a missed
// rescale or a max taken over masked keys shows at once.
TEST(CoreAttentionMma, HostAlgorithmMatchesTheReferenceWithPeakedSoftmax) {
  std::mt19937_64 rng(11);
  AttentionBatch b = MakeBatch(ScaledShape(2, 2, 32), TileCrossingDocuments(rng, 300), rng);
  for (float& x : b.q) x *= 6.0f;
  RoundInputsToBf16(b);
  ExpectNear(RunHostMma(b), RunReference(b), kMmaAttentionTolerance, "peaked");
}

// The tolerance is tight enough to see a mask off by one key: the
// reference with every query seeing one key fewer (its own) is far away.
TEST(CoreAttentionMma, WrongMasksAreCaught) {
  std::mt19937_64 rng(5);
  const AttentionBatch b = Bf16Batch(ScaledShape(2, 1, 64), TileCrossingDocuments(rng), rng);
  const AttentionOutputs got = RunHostMma(b);
  // Each task's queries shifted one position earlier: every query attends
  // one key fewer, and the first query of a document is dropped.
  AttentionBatch shifted = b;
  shifted.tasks.clear();
  for (AttentionTask task : b.tasks) {
    if (task.q_begin == 0) {
      ++task.q_begin;
      ++task.q_row;
      if (task.q_begin == task.q_end) continue;
    }
    shifted.tasks.push_back({task.q_begin - 1, task.q_end - 1, task.q_row, task.kv_row});
  }
  const AttentionOutputs wrong = RunReference(shifted);
  EXPECT_GT(RelativeError(got.o, wrong.o), 5 * kMmaAttentionTolerance);
}

TEST(CoreAttentionMma, PaddedHeadDims) {
  EXPECT_EQ(MmaPaddedHeadDim(1), 32);
  EXPECT_EQ(MmaPaddedHeadDim(32), 32);
  EXPECT_EQ(MmaPaddedHeadDim(33), 64);
  EXPECT_EQ(MmaPaddedHeadDim(64), 64);
  EXPECT_EQ(MmaPaddedHeadDim(65), 96);
  EXPECT_EQ(MmaPaddedHeadDim(96), 96);
  EXPECT_EQ(MmaPaddedHeadDim(97), 128);
  EXPECT_EQ(MmaPaddedHeadDim(kAttentionMaxHeadDim), 128);
}

}  // namespace
}  // namespace corescape::kernels::cuda
