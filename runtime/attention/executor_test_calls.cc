#include "runtime/attention/executor_test_calls.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"

namespace corescape::attention {

void FillRandomTensors(std::mt19937& rng, const kernels::AttentionShape& shape, RandomBatch& b) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& x, int64_t width) {
    x.resize(b.rows * width);
    for (float& value : x) value = normal(rng);
  };
  fill(b.q, int64_t{shape.n_heads} * shape.head_dim);
  fill(b.k, int64_t{shape.n_kv_heads} * shape.head_dim);
  fill(b.v, int64_t{shape.n_kv_heads} * shape.head_dim);
  fill(b.d_o, int64_t{shape.n_heads} * shape.head_dim);
}

Outputs ZeroOutputs(const kernels::AttentionShape& shape, int64_t rows) {
  const int64_t qw = int64_t{shape.n_heads} * shape.head_dim;
  const int64_t kw = int64_t{shape.n_kv_heads} * shape.head_dim;
  Outputs out;
  out.o.assign(rows * qw, 0.0f);
  out.lse.assign(rows * shape.n_heads, 0.0f);
  out.d_q.assign(rows * qw, 0.0f);
  out.d_k.assign(rows * kw, 0.0f);
  out.d_v.assign(rows * kw, 0.0f);
  return out;
}

namespace {

model::AttentionInputs Inputs(int layer, const kernels::AttentionShape& shape,
                              const RandomBatch& b) {
  return {.layer = layer,
          .shape = shape,
          .tasks = b.tasks,
          .rows = b.rows,
          .q = b.q.data(),
          .k = b.k.data(),
          .v = b.v.data()};
}

}  // namespace

model::AttentionForwardCall ForwardCall(int layer, const kernels::AttentionShape& shape,
                                        const RandomBatch& b, Outputs& out) {
  return {.in = Inputs(layer, shape, b), .o = out.o.data(), .lse = out.lse.data()};
}

model::AttentionBackwardCall BackwardCall(int layer, const kernels::AttentionShape& shape,
                                          const RandomBatch& b, Outputs& out) {
  return {.in = Inputs(layer, shape, b),
          .o = out.o.data(),
          .lse = out.lse.data(),
          .d_o = b.d_o.data(),
          .d_q = out.d_q.data(),
          .d_k = out.d_k.data(),
          .d_v = out.d_v.data()};
}

absl::Status RunCalls(model::CoreAttentionExecutor& executor, const kernels::AttentionShape& shape,
                      int layers, const RandomBatch& b, bool backward, Outputs& out) {
  out = ZeroOutputs(shape, b.rows);
  for (int layer = 0; layer < layers; ++layer) {
    if (absl::Status s = executor.Forward(ForwardCall(layer, shape, b, out)); !s.ok()) return s;
  }
  for (int layer = layers - 1; backward && layer >= 0; --layer) {
    std::fill(out.d_k.begin(), out.d_k.end(), 0.0f);  // the executor accumulates
    std::fill(out.d_v.begin(), out.d_v.end(), 0.0f);
    if (absl::Status s = executor.Backward(BackwardCall(layer, shape, b, out)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double{a[i]} - b[i]));
    scale = std::max(scale, std::abs(double{b[i]}));
  }
  return scale > 0 ? diff / scale : diff;
}

ModelRun RunModel(const model::ModelConfig& config, const std::vector<model::ModelBatch>& batches,
                  model::CoreAttentionExecutor& executor) {
  ModelRun result;
  auto model = model::Transformer::Create(config);
  EXPECT_TRUE(model.ok()) << model.status();
  model->InitializeWeights(11);
  EXPECT_TRUE(model->ZeroGradients().ok());
  for (size_t m = 0; m < batches.size(); ++m) {
    model::Activations activations;
    auto loss = model->Forward(batches[m], executor, activations);
    EXPECT_TRUE(loss.ok()) << loss.status();
    if (!loss.ok()) return result;
    result.losses.push_back(loss->loss_sum);
    if (m == 1) continue;  // validation: forward only
    absl::Status s = model->Backward(executor, activations, 1.0f / 1000);
    EXPECT_TRUE(s.ok()) << s;
  }
  result.gradients = model->gradients();
  return result;
}

void ExpectSameModelRuns(const model::ModelConfig& config, const std::vector<ModelRun>& actual,
                         const std::vector<ModelRun>& expected) {
  auto model = model::Transformer::Create(config);
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t w = 0; w < actual.size(); ++w) {
    ASSERT_EQ(actual[w].losses.size(), 3u);
    for (int m = 0; m < 3; ++m) {
      EXPECT_NEAR(actual[w].losses[m], expected[w].losses[m],
                  1e-5 * std::abs(expected[w].losses[m]))
          << "worker " << w << " micro-batch " << m;
    }
    for (const model::TensorSlot& slot : model->layout().tensors()) {
      std::vector<float> a(actual[w].gradients.begin() + slot.offset,
                           actual[w].gradients.begin() + slot.offset + slot.size);
      std::vector<float> b(expected[w].gradients.begin() + slot.offset,
                           expected[w].gradients.begin() + slot.offset + slot.size);
      EXPECT_LE(RelativeError(a, b), 1e-5) << "worker " << w << " " << slot.name;
    }
  }
}

}  // namespace corescape::attention
