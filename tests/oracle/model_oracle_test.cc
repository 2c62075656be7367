// Checks the C++ transformer against an independent PyTorch implementation
// (model_oracle.py, autograd in float64): logits, loss, every parameter
// gradient, and the losses of 10 AdamW steps, on packed batches with several
// documents per row, split documents (positions continuing from an offset),
// padding, grouped-query attention and tied embeddings.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/base/atomic_file.h"
#include "runtime/model/transformer.h"
#include "runtime/optim/adamw.h"
#include "runtime/optim/lr_schedule.h"

namespace corescape::model {
namespace {

using nlohmann::json;

struct Segment {
  int row, start, length, position_offset;
};

ModelBatch MakeBatch(int vocab, int seq_len, const std::vector<Segment>& segments,
                     int batch_size, uint32_t seed) {
  ModelBatch batch;
  batch.batch_size = batch_size;
  batch.seq_len = seq_len;
  const int64_t rows = batch.rows();
  batch.tokens.assign(rows, vocab - 1);  // padding token
  batch.targets.assign(rows, -1);
  batch.positions.assign(rows, 0);
  uint32_t state = seed;
  auto next = [&]() { return (state = state * 1664525u + 1013904223u) >> 8; };
  for (const Segment& s : segments) {
    const int64_t first = int64_t{s.row} * seq_len + s.start;
    for (int i = 0; i < s.length; ++i) {
      batch.tokens[first + i] = static_cast<int32_t>(next() % (vocab - 1));
      batch.positions[first + i] = s.position_offset + i;
      // Every token predicts something except, sometimes, a document's last.
      batch.targets[first + i] = (i + 1 == s.length && s.length % 2 == 0)
                                     ? -1
                                     : static_cast<int32_t>(next() % vocab);
    }
    kernels::AttentionTask task;
    task.q_begin = 0;
    task.q_end = s.length;
    task.q_row = first;
    task.kv_row = first;
    batch.attention_tasks.push_back(task);
  }
  return batch;
}

std::vector<float> ReadFloats(const std::string& path) {
  auto contents = ReadFileToString(path);
  EXPECT_TRUE(contents.ok()) << contents.status();
  std::vector<float> values(contents->size() / sizeof(float));
  std::memcpy(values.data(), contents->data(), values.size() * sizeof(float));
  return values;
}

// ||a − b|| / ||b||
double RelativeError(const float* a, const float* b, int64_t n) {
  double diff = 0.0, norm = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    diff += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    norm += double{b[i]} * b[i];
  }
  return norm == 0.0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

struct OracleCase {
  ModelConfig config;
  std::vector<Segment> segments;
  int batch_size;
  int seq_len;
};

void RunCase(const std::string& name, const OracleCase& c) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/oracle-", name);
  ASSERT_TRUE(MakeDirectories(dir).ok());

  auto created = Transformer::Create(c.config);
  ASSERT_TRUE(created.ok()) << created.status();
  Transformer& model = *created;
  model.InitializeWeights(1234);
  const ModelBatch batch = MakeBatch(c.config.vocab_size, c.seq_len, c.segments,
                                     c.batch_size, 99);

  optim::LrSchedule schedule;
  schedule.kind = optim::LrSchedule::Kind::kCosine;
  schedule.peak_lr = 3e-3;
  schedule.min_lr = 3e-4;
  schedule.warmup_steps = 3;
  schedule.total_steps = 10;
  optim::AdamWConfig adamw_config;
  adamw_config.beta1 = 0.9;
  adamw_config.beta2 = 0.95;
  adamw_config.epsilon = 1e-8;
  adamw_config.weight_decay = 0.1;
  const double grad_clip = 1.0;

  json tensors = json::array();
  std::vector<uint8_t> decay_mask(model.layout().total_size(), 0);
  for (const TensorSlot& slot : model.layout().tensors()) {
    tensors.push_back({{"name", slot.name}, {"offset", slot.offset}, {"shape", slot.shape}});
    if (slot.is_matrix) {
      std::fill(decay_mask.begin() + slot.offset, decay_mask.begin() + slot.offset + slot.size, 1);
    }
  }
  json segments = json::array();
  for (const Segment& s : c.segments) segments.push_back({s.row, s.start, s.length});
  const ModelConfig& m = c.config;
  json case_json = {
      {"config",
       {{"n_layers", m.n_layers}, {"d_model", m.d_model}, {"n_heads", m.n_heads},
        {"n_kv_heads", m.n_kv_heads}, {"d_ff", m.d_ff}, {"vocab_size", m.vocab_size},
        {"rope_theta", m.rope_theta}, {"norm_eps", m.norm_eps},
        {"tie_embeddings", m.tie_embeddings}}},
      {"tensors", tensors},
      {"batch",
       {{"batch_size", batch.batch_size}, {"seq_len", batch.seq_len},
        {"tokens", batch.tokens}, {"targets", batch.targets},
        {"positions", batch.positions}, {"segments", segments}}},
      {"optimizer",
       {{"lr", schedule.peak_lr}, {"min_lr", schedule.min_lr},
        {"warmup_steps", schedule.warmup_steps}, {"steps", schedule.total_steps},
        {"beta1", adamw_config.beta1}, {"beta2", adamw_config.beta2},
        {"epsilon", adamw_config.epsilon}, {"weight_decay", adamw_config.weight_decay},
        {"grad_clip", grad_clip}}}};
  ASSERT_TRUE(WriteFileAtomically(dir + "/case.json", case_json.dump()).ok());
  const std::vector<float>& weights = model.parameters();
  ASSERT_TRUE(WriteFileAtomically(
                  dir + "/weights.bin",
                  std::string(reinterpret_cast<const char*>(weights.data()),
                              weights.size() * sizeof(float)))
                  .ok());

  const std::string command =
      absl::StrCat("/usr/bin/python3 -B tests/oracle/model_oracle.py '", dir, "'");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  // First forward and backward.
  LocalCoreAttention attention(nullptr);
  Activations activations;
  auto loss = model.Forward(batch, attention, activations);
  ASSERT_TRUE(loss.ok()) << loss.status();
  model.ZeroGradients();
  ASSERT_TRUE(model.Backward(attention, activations, 1.0f / loss->tokens).ok());

  auto result = json::parse(*ReadFileToString(dir + "/result.json"));
  const double oracle_loss = result["loss"];
  EXPECT_LT(std::abs(loss->mean() - oracle_loss) / oracle_loss, 1e-4)
      << "loss " << loss->mean() << " vs " << oracle_loss;

  std::vector<float> oracle_logits = ReadFloats(dir + "/logits.bin");
  ASSERT_EQ(oracle_logits.size(), activations.logits.size() / sizeof(float));
  EXPECT_LT(RelativeError(activations.logits.as<float>(), oracle_logits.data(),
                          oracle_logits.size()),
            1e-4);

  std::vector<float> oracle_grads = ReadFloats(dir + "/grads.bin");
  ASSERT_EQ(oracle_grads.size(), model.gradients().size());
  for (const TensorSlot& slot : model.layout().tensors()) {
    const double error = RelativeError(model.gradients().data() + slot.offset,
                                       oracle_grads.data() + slot.offset, slot.size);
    EXPECT_LT(error, 1e-4) << slot.name;
  }

  // Ten AdamW steps on the same batch.
  optim::AdamW optimizer(adamw_config, decay_mask);
  std::vector<double> losses;
  for (int step = 0; step < schedule.total_steps; ++step) {
    ASSERT_TRUE(model.ZeroGradients().ok());
    auto step_loss = model.Forward(batch, attention, activations);
    ASSERT_TRUE(step_loss.ok());
    ASSERT_TRUE(model.Backward(attention, activations, 1.0f / step_loss->tokens).ok());
    optim::ClipGradientNorm(model.gradients().data(), model.gradients().size(), grad_clip);
    ASSERT_TRUE(optimizer.Step(model.parameters().data(), model.gradients().data(),
                               model.parameters().size(), schedule.At(step))
                    .ok());
    losses.push_back(step_loss->mean());
  }
  ASSERT_EQ(result["step_losses"].size(), losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    const double expected = result["step_losses"][i];
    EXPECT_LT(std::abs(losses[i] - expected) / expected, 1e-4)
        << "step " << i << ": " << losses[i] << " vs " << expected;
  }
  // The run must actually train, or the comparison proves little.
  EXPECT_LT(losses.back(), losses.front() - 0.1);
}

ModelConfig SmallConfig(bool tie, int n_kv_heads) {
  ModelConfig config;
  config.n_layers = 2;
  config.d_model = 48;
  config.n_heads = 4;
  config.n_kv_heads = n_kv_heads;
  config.d_ff = 96;
  config.vocab_size = 259;
  config.max_seq_len = 64;
  config.tie_embeddings = tie;
  return config;
}

TEST(ModelOracleTest, PackedDocumentsGqaUntied) {
  // Row 0: three documents, the last a split piece continuing at position 20.
  // Row 1: one piece of a long document starting at position 37.
  // Row 2: a document, a one-token document, then padding.
  RunCase("gqa", {SmallConfig(false, 2),
                  {{0, 0, 10, 0}, {0, 10, 15, 0}, {0, 25, 7, 20},
                   {1, 0, 32, 37},
                   {2, 0, 19, 0}, {2, 19, 1, 0}},
                  3, 32});
}

TEST(ModelOracleTest, TiedEmbeddingsMultiHead) {
  RunCase("tied", {SmallConfig(true, 4),
                   {{0, 0, 24, 0}, {0, 24, 8, 100}, {1, 0, 5, 3}, {1, 5, 27, 0}},
                   2, 32});
}

}  // namespace
}  // namespace corescape::model
