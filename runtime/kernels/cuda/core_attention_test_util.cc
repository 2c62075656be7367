#include "runtime/kernels/cuda/core_attention_test_util.h"

#include <cmath>
#include <utility>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/core_attention_reference.h"
#include "runtime/kernels/cuda/casts.h"
#include "runtime/kernels/cuda/core_attention_mma_host.h"
#include "runtime/kernels/cuda/core_attention_tiles.h"

namespace corescape::kernels::cuda {

AttentionOutputs InitialOutputs(const AttentionBatch& b, const std::vector<float>& initial_kv_grad) {
  const std::vector<float> kv_grad = initial_kv_grad.empty() ? std::vector<float>(b.kv_floats()) : initial_kv_grad;
  return {std::vector<float>(b.q_floats()), std::vector<float>(b.lse_floats()), std::vector<float>(b.q_floats()),
          kv_grad, kv_grad};
}

AttentionOutputs RunReference(const AttentionBatch& b, const std::vector<float>& initial_kv_grad) {
  AttentionOutputs out = InitialOutputs(b, initial_kv_grad);
  absl::Status forward = ReferenceAttentionForward(b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(),
                                                   b.kv_rows, out.o.data(), out.lse.data());
  EXPECT_TRUE(forward.ok()) << forward;
  absl::Status backward =
      ReferenceAttentionBackward(b.shape, b.tasks, b.q.data(), b.q_rows, b.k.data(), b.v.data(), b.kv_rows,
                                 b.d_o.data(), out.d_q.data(), out.d_k.data(), out.d_v.data());
  EXPECT_TRUE(backward.ok()) << backward;
  return out;
}

AttentionOutputs RunHostMma(const AttentionBatch& b, const std::vector<float>& initial_kv_grad) {
  AttentionOutputs out = InitialOutputs(b, initial_kv_grad);
  absl::StatusOr<CoreAttentionTiles> plan = PlanCoreAttentionTiles(b.shape, b.tasks, b.q_rows, b.kv_rows);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return out;
  const std::vector<uint16_t> q = ToBf16(b.q), k = ToBf16(b.k), v = ToBf16(b.v), d_o = ToBf16(b.d_o);
  std::vector<float> delta(b.lse_floats());
  HostMmaAttentionForward(*plan, q.data(), k.data(), v.data(), out.o.data(), out.lse.data());
  HostMmaAttentionBackward(*plan, q.data(), k.data(), v.data(), out.o.data(), out.lse.data(), d_o.data(),
                           delta.data(), out.d_q.data(), out.d_k.data(), out.d_v.data());
  return out;
}

void ExpectNear(const AttentionOutputs& got, const AttentionOutputs& want, double tolerance,
                const std::string& what) {
  const std::pair<const char*, std::pair<const std::vector<float>*, const std::vector<float>*>> tensors[] = {
      {"O", {&got.o, &want.o}},       {"LSE", {&got.lse, &want.lse}}, {"dQ", {&got.d_q, &want.d_q}},
      {"dK", {&got.d_k, &want.d_k}}, {"dV", {&got.d_v, &want.d_v}},
  };
  for (const auto& [name, pair] : tensors) {
    const double error = RelativeError(*pair.first, *pair.second);
    EXPECT_LT(error, tolerance) << what << ": " << name;  // NaN fails too
    ::testing::Test::RecordProperty(what + " " + name, std::to_string(error));
  }
}

std::vector<uint16_t> ToBf16(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = Bf16FromFloat(x[i]);
  return out;
}

void RoundInputsToBf16(AttentionBatch& b) {
  for (std::vector<float>* x : {&b.q, &b.k, &b.v, &b.d_o}) {
    for (float& value : *x) value = FloatFromBf16(Bf16FromFloat(value));
  }
}

std::vector<DocumentPieces> TileCrossingDocuments(std::mt19937_64& rng, int64_t max_length) {
  std::vector<DocumentPieces> docs = {
      {1, {{0, 1}}},
      {300, {{100, 180}, {250, 300}}},
      {97, {{0, 97}}},
      {130, {{0, 33}, {97, 130}}},
      {65, {{64, 65}}},
  };
  for (DocumentPieces& doc : RandomDocuments(rng, 4, max_length)) docs.push_back(std::move(doc));
  return docs;
}

std::vector<float> RandomKvGrad(const AttentionBatch& b) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> grad(b.kv_floats());
  for (float& g : grad) g = normal(rng);
  return grad;
}

AttentionShape ScaledShape(int n_heads, int n_kv_heads, int head_dim) {
  return {n_heads, n_kv_heads, head_dim, 1.0f / std::sqrt(static_cast<float>(head_dim))};
}

}  // namespace corescape::kernels::cuda
