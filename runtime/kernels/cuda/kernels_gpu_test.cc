// Every non-optimizer launch on the GPU vs the CPU reference. Bitwise where
// the device computes the same IEEE operations in the same order (casts,
// masks, embedding: +, ×, ÷, sqrtf are correctly rounded on both and
// nothing is fused); a stated tolerance where the device's transcendental
// functions (expf, exp, cos, sin, pow) round differently from glibc or it
// sums a row as a tree (RMSNorm, cross-entropy).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/cross_entropy.h"
#include "runtime/kernels/cpu/embedding.h"
#include "runtime/kernels/cpu/rmsnorm.h"
#include "runtime/kernels/cpu/rope.h"
#include "runtime/kernels/cpu/swiglu.h"
#include "runtime/kernels/cuda/bitwise_test_util.h"
#include "runtime/kernels/cuda/casts.h"
#include "runtime/kernels/cuda/casts_cuda.h"
#include "runtime/kernels/cuda/cross_entropy_cuda.h"
#include "runtime/kernels/cuda/embedding_cuda.h"
#include "runtime/kernels/cuda/gpu_test_util.h"
#include "runtime/kernels/cuda/mask_bits.h"
#include "runtime/kernels/cuda/mask_bits_cuda.h"
#include "runtime/kernels/cuda/topk_test_util.h"
#include "runtime/kernels/cuda/rmsnorm_cuda.h"
#include "runtime/kernels/cuda/rope_cuda.h"
#include "runtime/kernels/cuda/swiglu_cuda.h"
#include "runtime/kernels/cuda/topk_cuda.h"
#include "runtime/optim/sparse_mask.h"

namespace corescape::kernels::cuda {

using host_device::TopKBy;
using host_device::TopKSegment;

namespace {

using KernelsGpuTest = GpuTest;

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float relative, float absolute) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], relative * std::fabs(want[i]) + absolute) << "entry " << i;
  }
}

TEST_F(KernelsGpuTest, Bf16CastsMatchTheHostBodyOnEveryBf16AndRandomFloats) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  auto all_dev = Upload(all);
  auto as_float_dev = Zeros<float>(65536);
  ASSERT_TRUE(LaunchFloatFromBf16(all_dev.as<uint16_t>(), as_float_dev.as<float>(), 65536, stream()).ok());
  const std::vector<float> as_float = Download<float>(as_float_dev, 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    uint32_t bits;
    std::memcpy(&bits, &as_float[h], 4);
    ASSERT_EQ(bits, h << 16);
  }
  std::mt19937 rng(3);
  std::vector<float> x(1 << 22);
  for (float& f : x) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    std::memcpy(&f, &bits, 4);
  }
  auto x_dev = Upload(x);
  auto h_dev = Zeros<uint16_t>(x.size());
  ASSERT_TRUE(LaunchBf16FromFloat(x_dev.as<float>(), h_dev.as<uint16_t>(), x.size(), stream()).ok());
  const std::vector<uint16_t> h = Download<uint16_t>(h_dev, x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], Bf16FromFloat(x[i])) << i;
}

TEST_F(KernelsGpuTest, MaskBitsRoundTripAndMatchTheHostBody) {
  const int64_t range = 100001, begin = 5000;
  std::vector<uint8_t> flags(range, 0);
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < range; i += 7) {
    flags[i] = 1;
    indices.push_back(begin + i);
  }
  auto flags_dev = Upload(flags), indices_dev = Upload(indices);
  auto packed_dev = Zeros<uint32_t>(MaskWords(range)), set_dev = Zeros<uint32_t>(MaskWords(range));
  auto unpacked_dev = Zeros<uint8_t>(range);
  ASSERT_TRUE(LaunchPackMask(flags_dev.as<uint8_t>(), range, packed_dev.as<uint32_t>(), stream()).ok());
  ASSERT_TRUE(LaunchSetMaskBits(indices_dev.as<int64_t>(), indices.size(), begin, range, set_dev.as<uint32_t>(),
                                stream())
                  .ok());
  ASSERT_TRUE(LaunchUnpackMask(packed_dev.as<uint32_t>(), range, unpacked_dev.as<uint8_t>(), stream()).ok());
  const std::vector<uint32_t> packed = Download<uint32_t>(packed_dev, MaskWords(range));
  std::vector<uint32_t> want(MaskWords(range));
  for (int64_t w = 0; w < MaskWords(range); ++w) want[w] = PackMaskWord(flags.data(), w, range);
  EXPECT_EQ(packed, want);
  EXPECT_EQ(Download<uint32_t>(set_dev, MaskWords(range)), want);
  EXPECT_EQ(Download<uint8_t>(unpacked_dev, range), flags);
}

// The launch sums each row (Σx², Σ dy·w·x) and each dweight column as
// trees, the CPU left to right: fp32 sums of ≤ 1000 terms of size ~1 differ
// by ~1e-6 relative, so y, rstd and dx stay within 1e-5 relative (plus
// 1e-5 absolute where dx's two terms cancel) and dweight, a sum of 300 rows
// whose value may cancel to near 0, within 1e-4 absolute. A wrong term or
// coefficient moves entries by ~1.
TEST_F(KernelsGpuTest, RmsNormMatchesTheCpuKernel) {
  // dim 512: two entries per thread of a row block; 1000: a partial last
  // column block of dweight and uneven strides.
  for (const auto& [rows, dim] : {std::pair<int64_t, int64_t>{300, 512}, {37, 1000}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(dim));
    const std::vector<float> x = RandomFloats(rows * dim, 1, 2.0f), w = RandomFloats(dim, 2),
                             dy = RandomFloats(rows * dim, 3);
    std::vector<float> y(rows * dim), rstd(rows), dx = RandomFloats(rows * dim, 4), dw = RandomFloats(dim, 5);
    auto x_dev = Upload(x), w_dev = Upload(w), dy_dev = Upload(dy), dx_dev = Upload(dx), dw_dev = Upload(dw);
    auto y_dev = Zeros<float>(rows * dim), rstd_dev = Zeros<float>(rows);
    RmsNormForward(x.data(), w.data(), y.data(), rstd.data(), rows, dim, 1e-5f);
    RmsNormBackward(x.data(), w.data(), rstd.data(), dy.data(), dx.data(), dw.data(), rows, dim);
    ASSERT_TRUE(LaunchRmsNormForward(x_dev.as<float>(), w_dev.as<float>(), y_dev.as<float>(), rstd_dev.as<float>(),
                                     rows, dim, 1e-5f, stream())
                    .ok());
    ASSERT_TRUE(LaunchRmsNormBackward(x_dev.as<float>(), w_dev.as<float>(), rstd_dev.as<float>(), dy_dev.as<float>(),
                                      dx_dev.as<float>(), dw_dev.as<float>(), rows, dim, stream())
                    .ok());
    ExpectNear(Download<float>(y_dev, rows * dim), y, 1e-5f, 1e-6f);
    ExpectNear(Download<float>(rstd_dev, rows), rstd, 1e-5f, 0.0f);
    ExpectNear(Download<float>(dx_dev, rows * dim), dx, 1e-5f, 1e-5f);
    ExpectNear(Download<float>(dw_dev, dim), dw, 1e-5f, 1e-4f);
  }
}

// cos/sin of the double angle differ from glibc by an ulp or two of a
// double; rounded to float they differ by at most one float ulp (6e-8), so
// a rotated entry (two products of |x| ≲ 5) moves by < 1e-6.
TEST_F(KernelsGpuTest, RopeMatchesTheCpuKernelWithinOneUlpOfTheAngle) {
  const int64_t rows = 257;
  const int heads = 4, head_dim = 64;
  std::vector<int32_t> positions(rows);
  for (int64_t r = 0; r < rows; ++r) positions[r] = static_cast<int32_t>(r * 509);
  for (double direction : {1.0, -1.0}) {
    std::vector<float> x = RandomFloats(rows * heads * head_dim, 6);
    auto x_dev = Upload(x), pos_dev = Upload(positions);
    if (direction > 0) {
      RopeForward(x.data(), positions.data(), rows, heads, head_dim, 10000.0);
    } else {
      RopeBackward(x.data(), positions.data(), rows, heads, head_dim, 10000.0);
    }
    ASSERT_TRUE(LaunchRope(x_dev.as<float>(), pos_dev.as<int32_t>(), rows, heads, head_dim, 10000.0, direction, stream()).ok());
    ExpectNear(Download<float>(x_dev, x.size()), x, 0.0f, 1e-6f);
  }
}

// The device expf is within 2 ulp: σ and silu within ~4 ulp relative, so
// 1e-6 relative (plus 1e-30 for zeros) bounds every output.
TEST_F(KernelsGpuTest, SwiGluMatchesTheCpuKernelWithinExpfError) {
  const int64_t n = 100000;
  const std::vector<float> gate = RandomFloats(n, 7, 4.0f), up = RandomFloats(n, 8), d_h = RandomFloats(n, 9);
  std::vector<float> h(n), dg(n), du(n);
  SwiGluForward(gate.data(), up.data(), h.data(), n);
  SwiGluBackward(gate.data(), up.data(), d_h.data(), dg.data(), du.data(), n);
  auto g_dev = Upload(gate), u_dev = Upload(up), dh_dev = Upload(d_h);
  auto h_dev = Zeros<float>(n), dg_dev = Zeros<float>(n), du_dev = Zeros<float>(n);
  ASSERT_TRUE(LaunchSwiGluForward(g_dev.as<float>(), u_dev.as<float>(), h_dev.as<float>(), n, stream()).ok());
  ASSERT_TRUE(LaunchSwiGluBackward(g_dev.as<float>(), u_dev.as<float>(), dh_dev.as<float>(), dg_dev.as<float>(),
                                   du_dev.as<float>(), n, stream())
                  .ok());
  ExpectNear(Download<float>(h_dev, n), h, 1e-6f, 1e-30f);
  ExpectNear(Download<float>(du_dev, n), du, 1e-6f, 1e-30f);
  // The gate's gradient d_h·u·σ(g)·(1 + g·(1 − σ(g))) sums terms of size up
  // to |d_h·u|·(1 + |g|) that cancel (1 − σ as σ → 1, and the whole factor
  // near g ≈ −1.28), so σ's few-ulp difference is bounded against the
  // terms, not the result (seen on an H200: 4.2e-5 of a result 0.028% of
  // its terms' scale).
  const std::vector<float> dg_got = Download<float>(dg_dev, n);
  for (int64_t i = 0; i < n; ++i) {
    const float terms = std::fabs(d_h[i] * up[i]) * (1.0f + std::fabs(gate[i]));
    ASSERT_NEAR(dg_got[i], dg[i], 8e-6f * terms + 1e-30f) << "entry " << i;
  }
}

TEST_F(KernelsGpuTest, EmbeddingMatchesTheCpuKernelBitwise) {
  const int64_t vocab = 1000, dim = 250, rows = 2048;  // a partial last block of 32 columns
  std::vector<int32_t> tokens(rows);
  std::mt19937 rng(10);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 50);  // many repeats
  const std::vector<float> table = RandomFloats(vocab * dim, 11), d_out = RandomFloats(rows * dim, 12);
  std::vector<float> out(rows * dim), d_table = RandomFloats(vocab * dim, 13);
  auto t_dev = Upload(tokens), table_dev = Upload(table), dout_dev = Upload(d_out), dtable_dev = Upload(d_table);
  auto out_dev = Zeros<float>(rows * dim);
  EmbeddingForward(tokens.data(), table.data(), out.data(), rows, dim);
  EmbeddingBackward(tokens.data(), d_out.data(), d_table.data(), rows, dim);
  ASSERT_TRUE(LaunchEmbeddingForward(t_dev.as<int32_t>(), table_dev.as<float>(), out_dev.as<float>(), rows, dim, stream()).ok());
  ASSERT_TRUE(LaunchEmbeddingBackward(t_dev.as<int32_t>(), dout_dev.as<float>(), dtable_dev.as<float>(), rows, dim,
                                      stream())
                  .ok());
  EXPECT_TRUE(SameBits(Download<float>(out_dev, rows * dim), out));
  EXPECT_TRUE(SameBits(Download<float>(dtable_dev, vocab * dim), d_table));
}

// exp/log in double on the device are within 1–2 double ulp of glibc: the
// loss agrees to 1e-12 relative; d_logits, rounded to float, to one float
// ulp (1e-6 relative bounds it).
TEST_F(KernelsGpuTest, CrossEntropyMatchesTheCpuKernel) {
  const int64_t rows = 64, vocab = 5003;
  const std::vector<float> logits = RandomFloats(rows * vocab, 14, 3.0f);
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = r % 9 == 4 ? -1 : static_cast<int32_t>((r * 77) % vocab);
  std::vector<float> dz(rows * vocab);
  const CrossEntropyResult ref = CrossEntropy(logits.data(), targets.data(), rows, vocab, dz.data(), 0.01f);
  auto z_dev = Upload(logits), t_dev = Upload(targets);
  auto dz_dev = Zeros<float>(rows * vocab), loss_dev = Zeros<double>(rows);
  auto counted_dev = Zeros<uint8_t>(rows);
  ASSERT_TRUE(LaunchCrossEntropy(z_dev.as<float>(), t_dev.as<int32_t>(), rows, vocab, dz_dev.as<float>(), 0.01f,
                                 loss_dev.as<double>(), counted_dev.as<uint8_t>(), stream())
                  .ok());
  const std::vector<double> losses = Download<double>(loss_dev, rows);
  const std::vector<uint8_t> counted = Download<uint8_t>(counted_dev, rows);
  double loss_sum = 0.0;
  int64_t tokens = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (counted[r]) {
      loss_sum += losses[r];
      ++tokens;
    }
  }
  EXPECT_EQ(tokens, ref.tokens);
  EXPECT_NEAR(loss_sum, ref.loss_sum, 1e-12 * std::fabs(ref.loss_sum));
  ExpectNear(Download<float>(dz_dev, rows * vocab), dz, 1e-6f, 1e-30f);
}

// By value over signed statistics, and by magnitude (SCAPE's |e|, ties of
// opposite signs).
TEST_F(KernelsGpuTest, TopKSelectsWhatSelectTopKSelects) {
  for (TopKBy by : {TopKBy::kValue, TopKBy::kMagnitude}) {
    for (int64_t n : {1, 1000, 100003, 2000003}) {
      std::vector<float> v = RandomFloats(n, 16 + n);
      for (int64_t i = 0; i < n; i += 13) v[i] = -v[i / 2];  // ties in magnitude
      for (int64_t i = 7; i < n; i += 17) v[i] = v[i / 3];   // ties in value
      for (int64_t i = 5; i < n; i += 101) v[i] = NAN;
      if (n > 3) v[3] = -0.0f;
      std::vector<float> statistic = v;
      if (by == TopKBy::kMagnitude) {
        for (float& x : statistic) x = std::fabs(x);
      }
      auto v_dev = Upload(v);
      auto scratch_bytes = TopKScratchBytes(n);
      ASSERT_TRUE(scratch_bytes.ok()) << scratch_bytes.status();
      auto scratch = allocator_->Allocate(*scratch_bytes);
      ASSERT_TRUE(scratch.ok());
      for (int64_t k : {int64_t{1}, n / 100 + 1, n / 10 + 1, n}) {
        auto out_dev = Zeros<int64_t>(k);
        ASSERT_TRUE(SelectTopKOnDevice(v_dev.as<float>(), n, 777, k, out_dev.as<int64_t>(),
                                       scratch->data(), *scratch_bytes, stream(), by)
                        .ok());
        EXPECT_EQ(Download<int64_t>(out_dev, k), optim::SelectTopK(statistic, 777, k))
            << (by == TopKBy::kMagnitude ? "by magnitude" : "by value") << " n " << n << " k " << k;
      }
    }
  }
}

// Many segments in one selection (a rank's tensors): each its own top k,
// in segment order; empty segments, k = 0, k > numel and gaps included.
TEST_F(KernelsGpuTest, TopKInSegmentsSelectsEachSegmentsOwn) {
  std::mt19937 rng(31);
  std::vector<TopKSegment> segments;
  int64_t at = 3;
  for (int s = 0; s < 150; ++s) {
    const int64_t numel = s % 17 == 0 ? 0 : static_cast<int64_t>(rng() % (s % 5 == 0 ? 300000 : 5000));
    const int64_t k = s % 11 == 0 ? 0 : (s % 13 == 0 ? numel + 2 : numel / 10 + 1);
    segments.push_back({at, numel, k});
    at += numel + static_cast<int64_t>(rng() % 3);
  }
  std::vector<float> v = RandomFloats(at, 99);
  for (int64_t i = 0; i < at; i += 7) v[i] = -v[i / 2];  // ties in magnitude
  for (int64_t i = 5; i < at; i += 101) v[i] = NAN;
  std::vector<float> magnitude(v.size());
  for (size_t i = 0; i < v.size(); ++i) magnitude[i] = std::fabs(v[i]);
  const std::vector<int64_t> expected = SelectTopKPerSegment(magnitude, segments, 40);
  auto v_dev = Upload(v);
  auto scratch_bytes = TopKScratchBytes(segments);
  ASSERT_TRUE(scratch_bytes.ok()) << scratch_bytes.status();
  auto scratch = allocator_->Allocate(*scratch_bytes);
  ASSERT_TRUE(scratch.ok());
  auto out_dev = Zeros<int64_t>(static_cast<int64_t>(expected.size()));
  ASSERT_TRUE(SelectTopKInSegments(v_dev.as<float>(), segments, 40, out_dev.as<int64_t>(),
                                   scratch->data(), *scratch_bytes, stream(), TopKBy::kMagnitude)
                  .ok());
  EXPECT_EQ(Download<int64_t>(out_dev, static_cast<int64_t>(expected.size())), expected);
}

TEST_F(KernelsGpuTest, TopKRefusesTooSmallAScratch) {
  auto small = allocator_->Allocate(16);
  ASSERT_TRUE(small.ok());
  auto s_dev = Upload(std::vector<float>(1000, 1.0f));
  auto out_dev = Zeros<int64_t>(10);
  EXPECT_EQ(SelectTopKOnDevice(s_dev.as<float>(), 1000, 0, 10, out_dev.as<int64_t>(), small->data(), 16, stream()).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace corescape::kernels::cuda
