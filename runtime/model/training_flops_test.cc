#include "runtime/model/training_flops.h"

#include <string>

#include "gtest/gtest.h"
#include "runtime/model/parameter_layout.h"
#include "runtime/model/peak_flops.h"

namespace corescape::model {
namespace {

// The same count from the model's own parameter layout and a walk over
// every (query, key) pair: 6 FLOPs per token per matrix weight a token is
// multiplied by (every matrix but the embedding table; the head, tied or
// not) and 12·layers·q_width per attended key.
double CountedFlops(const ModelConfig& config, const ModelBatch& batch) {
  const ParameterLayout layout(config);
  double weights = 0;
  for (const TensorSlot& tensor : layout.tensors()) {
    if (tensor.is_matrix && tensor.offset != layout.token_embedding()) weights += tensor.size;
  }
  if (layout.lm_head() == layout.token_embedding()) {
    weights += static_cast<double>(config.vocab_size) * config.d_model;
  }
  double pairs = 0;
  for (const kernels::AttentionTask& task : batch.attention_tasks) {
    for (int64_t query = task.q_begin; query < task.q_end; ++query) {
      for (int64_t key = 0; key <= query; ++key) pairs += 1;
    }
  }
  return 6 * weights * batch.rows() + 12.0 * config.n_layers * config.q_width() * pairs;
}

TEST(TrainingFlops, MatchesTheLayoutAndThePairs) {
  for (const char* preset : {"tiny", "small", "llama-500m"}) {
    for (bool tied : {false, true}) {
      SCOPED_TRACE(std::string(preset) + (tied ? " tied" : ""));
      ModelConfig config = *PresetConfig(preset);
      config.tie_embeddings = tied;
      ModelBatch batch;
      batch.batch_size = 2;
      batch.seq_len = 96;
      // A whole document, one cut in two (its tail's queries see its head),
      // and one starting mid-row.
      batch.attention_tasks = {{0, 96, 0, 0}, {0, 40, 96, 96}, {40, 70, 136, 96}, {0, 26, 166, 166}};
      const double want = CountedFlops(config, batch);
      EXPECT_NEAR(TrainingFlops(config, batch), want, 1e-12 * want);
    }
  }
}

// One 64-token document costs four times the attention of four 16-token
// ones in the same row; the matrices cost the same.
TEST(TrainingFlops, AttentionGrowsWithTheDocumentNotTheRow) {
  const ModelConfig config = *PresetConfig("tiny");
  ModelBatch no_attention;
  no_attention.batch_size = 1;
  no_attention.seq_len = 64;
  ModelBatch one_document = no_attention, four_documents = no_attention;
  one_document.attention_tasks = {{0, 64, 0, 0}};
  for (int d = 0; d < 4; ++d) four_documents.attention_tasks.push_back({0, 16, 16 * d, 16 * d});
  const double matrices = TrainingFlops(config, no_attention);
  const double per_key = 12.0 * config.n_layers * config.q_width();
  EXPECT_GT(matrices, 0);
  EXPECT_EQ(TrainingFlops(config, one_document) - matrices, per_key * (64 * 65 / 2));
  EXPECT_EQ(TrainingFlops(config, four_documents) - matrices, per_key * 4 * (16 * 17 / 2));
}

TEST(DensePeakTflops, KnownGpusAndTheRest) {
  EXPECT_EQ(DensePeakTflops("NVIDIA H200", Precision::kBf16), 989);
  EXPECT_EQ(DensePeakTflops("NVIDIA H100 80GB HBM3", Precision::kBf16), 989);
  EXPECT_EQ(DensePeakTflops("NVIDIA H100 80GB HBM3", Precision::kFp32), 67);
  EXPECT_EQ(DensePeakTflops("NVIDIA GH200 480GB", Precision::kBf16), 989);
  EXPECT_EQ(DensePeakTflops("NVIDIA H100 PCIe", Precision::kBf16), 756);
  EXPECT_EQ(DensePeakTflops("NVIDIA H200 NVL", Precision::kBf16), 835);
  EXPECT_EQ(DensePeakTflops("NVIDIA A100-SXM4-80GB", Precision::kFp32), 19.5);
  EXPECT_EQ(DensePeakTflops("nvidia a100 80gb pcie", Precision::kBf16), 312);
  EXPECT_EQ(DensePeakTflops("cpu", Precision::kFp32), 0);
  EXPECT_EQ(DensePeakTflops("NVIDIA GeForce RTX 4090", Precision::kBf16), 0);
  EXPECT_EQ(DensePeakTflops("", Precision::kBf16), 0);
}

}  // namespace
}  // namespace corescape::model
