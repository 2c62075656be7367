// Core attention's launches on the GPU vs the double-precision reference.
// Tolerance 2e-5 on ||got − want|| / ||want||, as for the bodies on the CPU
// (core_attention_test.cc): the launches run those bodies, and fused
// multiply-adds and the device's expf/logf (within 2 ulp) change rounding
// at the 1e-7 level, far below what a wrong mask or rescale would cause.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/core_attention.h"
#include "runtime/kernels/cpu/attention_test_util.h"
#include "runtime/kernels/cpu/core_attention_reference.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"
#include "runtime/kernels/cuda/casts.h"
#include "runtime/kernels/cuda/core_attention_cuda.h"
#include "runtime/kernels/cuda/core_attention_tiles.h"
#include "runtime/kernels/cuda/gpu_test_util.h"

namespace corescape::kernels::cuda {
namespace {

constexpr double kTolerance = 2e-5;

std::vector<uint16_t> ToBf16(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = Bf16FromFloat(x[i]);
  return out;
}

void RoundToBf16(std::vector<float>& x) {
  for (float& value : x) value = FloatFromBf16(Bf16FromFloat(value));
}

struct Outputs {
  std::vector<float> o, lse, d_q, d_k, d_v;
};

class CoreAttentionGpuTest : public GpuTest {
 protected:

  // bf16: q, k, v and d_o go to the device as bf16 (b must hold values
  // bf16 represents exactly, as RoundedToBf16 makes them).
  Outputs RunOnDevice(const AttentionBatch& b, bool bf16 = false) {
    Outputs out;
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

Outputs RunReference(const AttentionBatch& b) {
  Outputs out{std::vector<float>(b.q_floats()), std::vector<float>(b.lse_floats()),
              std::vector<float>(b.q_floats()), std::vector<float>(b.kv_floats()), std::vector<float>(b.kv_floats())};
  EXPECT_TRUE(ReferenceAttentionForward(b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(), b.kv_rows,
                                        out.o.data(), out.lse.data())
                  .ok());
  EXPECT_TRUE(ReferenceAttentionBackward(b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(), b.kv_rows,
                                         b.d_o.data(), out.d_q.data(), out.d_k.data(), out.d_v.data())
                  .ok());
  return out;
}

AttentionShape Shape(int n_heads, int n_kv_heads, int head_dim) {
  return {n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
}

void ExpectNearReference(const Outputs& got, const Outputs& want, const std::string& what) {
  EXPECT_LT(RelativeError(got.o, want.o), kTolerance) << what << ": O";
  EXPECT_LT(RelativeError(got.lse, want.lse), kTolerance) << what << ": LSE";
  EXPECT_LT(RelativeError(got.d_q, want.d_q), kTolerance) << what << ": dQ";
  EXPECT_LT(RelativeError(got.d_k, want.d_k), kTolerance) << what << ": dK";
  EXPECT_LT(RelativeError(got.d_v, want.d_v), kTolerance) << what << ": dV";
}

TEST_F(CoreAttentionGpuTest, MatchesTheReferenceAcrossGqaGroupsAndHeadDims) {
  for (int head_dim : {16, 64, 128}) {
    for (int group : {1, 2, 4}) {
      std::mt19937_64 rng(head_dim * 10 + group);
      std::vector<DocumentPieces> docs = {{700, {{0, 90}, {300, 450}, {610, 700}}}, {1, {{0, 1}}}, {65, {{64, 65}}}};
      for (DocumentPieces& doc : RandomDocuments(rng, 6, 400)) docs.push_back(std::move(doc));
      const AttentionBatch b = MakeBatch(Shape(4, 4 / group, head_dim), docs, rng);
      const Outputs got = RunOnDevice(b);
      const Outputs want = RunReference(b);
      ExpectNearReference(got, want, "head_dim " + std::to_string(head_dim) + ", group " + std::to_string(group));
    }
  }
}

// bf16 inputs are widened exactly, so against the reference on the same
// bf16 values the error is the fp32 path's.
TEST_F(CoreAttentionGpuTest, Bf16InputsMatchTheReferenceOnTheSameValues) {
  std::mt19937_64 rng(23);
  AttentionBatch b = MakeBatch(Shape(4, 2, 64), RandomDocuments(rng, 8, 500), rng);
  for (std::vector<float>* x : {&b.q, &b.k, &b.v, &b.d_o}) RoundToBf16(*x);
  ExpectNearReference(RunOnDevice(b, /*bf16=*/true), RunReference(b), "bf16");
}

TEST_F(CoreAttentionGpuTest, BackwardIsBitwiseReproducible) {
  std::mt19937_64 rng(17);
  const AttentionBatch b = MakeBatch(Shape(8, 2, 64), RandomDocuments(rng, 12, 1500), rng);
  const Outputs first = RunOnDevice(b);
  const Outputs second = RunOnDevice(b);
  EXPECT_TRUE(SameBits(first.d_q, second.d_q));
  EXPECT_TRUE(SameBits(first.d_k, second.d_k));
  EXPECT_TRUE(SameBits(first.d_v, second.d_v));
}

}  // namespace
}  // namespace corescape::kernels::cuda
