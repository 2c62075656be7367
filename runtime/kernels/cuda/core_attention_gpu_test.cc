// Core attention's launches on the GPU vs the double-precision reference.
// fp32 launches: tolerance 2e-5 on ||got − want|| / ||want||, as for the
// bodies on the CPU (core_attention_test.cc): the launches run those
// bodies, and fused multiply-adds and the device's expf/logf (within 2 ulp)
// change rounding at the 1e-7 level, far below what a wrong mask or rescale
// would cause. Tensor-core (bf16) launches: kMmaAttentionTolerance against
// the reference, and kMmaVsHostTolerance against their own algorithm run on
// the host (core_attention_mma_host), from which only the order of the fp32
// sums inside each MMA and the device's expf differ.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cpu/attention_test_util.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"
#include "runtime/kernels/cuda/core_attention_cuda.h"
#include "runtime/kernels/cuda/core_attention_mma_host.h"
#include "runtime/kernels/cuda/core_attention_test_util.h"
#include "runtime/kernels/cuda/core_attention_tiles.h"
#include "runtime/kernels/cuda/gpu_test_util.h"

namespace corescape::kernels::cuda {
namespace {

constexpr double kTolerance = 2e-5;
constexpr double kMmaVsHostTolerance = 1e-3;

class CoreAttentionGpuTest : public GpuTest {
 protected:

  // bf16: q, k, v and d_o go to the device as bf16 (b must hold values
  // bf16 represents exactly, as RoundInputsToBf16 makes them).
  AttentionOutputs RunOnDevice(const AttentionBatch& b, bool bf16 = false) {
    AttentionOutputs out;
    absl::StatusOr<CoreAttentionTiles> plan = PlanCoreAttentionTiles(b.shape, b.tasks, b.q_rows, b.kv_rows);
    EXPECT_TRUE(plan.ok()) << plan.status();
    if (!plan.ok()) return out;
    absl::StatusOr<UploadedCoreAttentionTiles> tiles = UploadCoreAttentionTiles(*plan, *allocator_, *stream_);
    EXPECT_TRUE(tiles.ok()) << tiles.status();
    if (!tiles.ok()) return out;
    auto q = bf16 ? Upload(ToBf16(b.q)) : Upload(b.q), k = bf16 ? Upload(ToBf16(b.k)) : Upload(b.k);
    auto v = bf16 ? Upload(ToBf16(b.v)) : Upload(b.v), d_o = bf16 ? Upload(ToBf16(b.d_o)) : Upload(b.d_o);
    auto o = Zeros<float>(b.q_floats()), lse = Zeros<float>(b.lse_floats()), delta = Zeros<float>(b.lse_floats());
    auto d_q = Zeros<float>(b.q_floats()), d_k = Zeros<float>(b.kv_floats()), d_v = Zeros<float>(b.kv_floats());
    if (bf16) {
      EXPECT_TRUE(LaunchCoreAttentionForwardBf16(tiles->view(), q.as<uint16_t>(), k.as<uint16_t>(),
                                                 v.as<uint16_t>(), o.as<float>(), lse.as<float>(), stream())
                      .ok());
      EXPECT_TRUE(LaunchCoreAttentionBackwardBf16(tiles->view(), q.as<uint16_t>(), k.as<uint16_t>(),
                                                  v.as<uint16_t>(), o.as<float>(), lse.as<float>(),
                                                  d_o.as<uint16_t>(), delta.as<float>(), d_q.as<float>(),
                                                  d_k.as<float>(), d_v.as<float>(), stream())
                      .ok());
    } else {
      EXPECT_TRUE(LaunchCoreAttentionForward(tiles->view(), q.as<float>(), k.as<float>(), v.as<float>(),
                                             o.as<float>(), lse.as<float>(), stream())
                      .ok());
      EXPECT_TRUE(LaunchCoreAttentionBackward(tiles->view(), q.as<float>(), k.as<float>(), v.as<float>(),
                                              o.as<float>(), lse.as<float>(), d_o.as<float>(), delta.as<float>(),
                                              d_q.as<float>(), d_k.as<float>(), d_v.as<float>(), stream())
                      .ok());
    }
    out.o = Download<float>(o, b.q_floats());
    out.lse = Download<float>(lse, b.lse_floats());
    out.d_q = Download<float>(d_q, b.q_floats());
    out.d_k = Download<float>(d_k, b.kv_floats());
    out.d_v = Download<float>(d_v, b.kv_floats());
    return out;
  }
};

// Documents up to 700 tokens: three middle and end ranges of one, a single
// token, the last of 65; then 6 random ones up to 400.
std::vector<DocumentPieces> Documents(std::mt19937_64& rng) {
  std::vector<DocumentPieces> docs = {{700, {{0, 90}, {300, 450}, {610, 700}}}, {1, {{0, 1}}}, {65, {{64, 65}}}};
  for (DocumentPieces& doc : RandomDocuments(rng, 6, 400)) docs.push_back(std::move(doc));
  return docs;
}

TEST_F(CoreAttentionGpuTest, MatchesTheReferenceAcrossGqaGroupsAndHeadDims) {
  for (int head_dim : {16, 64, 128}) {
    for (int group : {1, 2, 4}) {
      std::mt19937_64 rng(head_dim * 10 + group);
      const AttentionBatch b = MakeBatch(ScaledShape(4, 4 / group, head_dim), Documents(rng), rng);
      ExpectNear(RunOnDevice(b), RunReference(b), kTolerance,
                 "head_dim " + std::to_string(head_dim) + ", group " + std::to_string(group));
    }
  }
}

// head_dim 20 stages element by element and pads to 32 columns; 64, 96
// and 128 move 16-byte chunks and fill theirs.
TEST_F(CoreAttentionGpuTest, TensorCoreLaunchesMatchTheReferenceAndTheirHostAlgorithm) {
  for (int head_dim : {20, 64, 96, 128}) {
    for (int group : {1, 4}) {
      std::mt19937_64 rng(head_dim * 10 + group + 1);
      AttentionBatch b = MakeBatch(ScaledShape(4, 4 / group, head_dim), Documents(rng), rng);
      RoundInputsToBf16(b);
      const std::string what = "bf16 head_dim " + std::to_string(head_dim) + ", group " + std::to_string(group);
      const AttentionOutputs got = RunOnDevice(b, /*bf16=*/true);
      ExpectNear(got, RunReference(b), kMmaAttentionTolerance, what);
      ExpectNear(got, RunHostMma(b), kMmaVsHostTolerance, what + " vs host");
    }
  }
}

TEST_F(CoreAttentionGpuTest, TensorCoreBackwardIsBitwiseReproducible) {
  std::mt19937_64 rng(19);
  AttentionBatch b = MakeBatch(ScaledShape(8, 2, 128), RandomDocuments(rng, 12, 1500), rng);
  RoundInputsToBf16(b);
  const AttentionOutputs first = RunOnDevice(b, /*bf16=*/true);
  const AttentionOutputs second = RunOnDevice(b, /*bf16=*/true);
  EXPECT_TRUE(SameBits(first.o, second.o));
  EXPECT_TRUE(SameBits(first.d_q, second.d_q));
  EXPECT_TRUE(SameBits(first.d_k, second.d_k));
  EXPECT_TRUE(SameBits(first.d_v, second.d_v));
}

TEST_F(CoreAttentionGpuTest, BackwardIsBitwiseReproducible) {
  std::mt19937_64 rng(17);
  const AttentionBatch b = MakeBatch(ScaledShape(8, 2, 64), RandomDocuments(rng, 12, 1500), rng);
  const AttentionOutputs first = RunOnDevice(b);
  const AttentionOutputs second = RunOnDevice(b);
  EXPECT_TRUE(SameBits(first.d_q, second.d_q));
  EXPECT_TRUE(SameBits(first.d_k, second.d_k));
  EXPECT_TRUE(SameBits(first.d_v, second.d_v));
}

}  // namespace
}  // namespace corescape::kernels::cuda
