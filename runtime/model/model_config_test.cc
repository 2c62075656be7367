#include "runtime/model/model_config.h"

#include "gtest/gtest.h"
#include "runtime/model/parameter_layout.h"

namespace corescape::model {
namespace {

TEST(ModelConfigTest, PresetsAreValidAndSized) {
  for (const std::string& name : PresetNames()) {
    auto config = PresetConfig(name);
    ASSERT_TRUE(config.ok()) << name;
    EXPECT_TRUE(config->Validate().ok()) << name;
    EXPECT_EQ(ParameterLayout(*config).total_size(), config->ParameterCount()) << name;
  }
  const int64_t tiny = PresetConfig("tiny")->ParameterCount();
  EXPECT_GT(tiny, 100'000);
  EXPECT_LT(tiny, 1'000'000);
  const int64_t small = PresetConfig("small")->ParameterCount();
  EXPECT_GT(small, 15'000'000);
  EXPECT_LT(small, 30'000'000);
  const int64_t mini = PresetConfig("mini")->ParameterCount();
  EXPECT_GT(mini, 2'500'000);
  EXPECT_LT(mini, 3'500'000);
  EXPECT_GT(mini, 5 * tiny);
  EXPECT_LT(mini, small / 5);
}

// The authors' script shapes, counted by hand: embeddings, then per layer two
// norms, wq, wk, wv, wo and the three SwiGLU matrices, then the final norm.
int64_t Count(int64_t layers, int64_t d, int64_t heads, int64_t kv_heads, int64_t ffn,
              int64_t vocab, bool tied) {
  const int64_t kv = d / heads * kv_heads;
  return vocab * d * (tied ? 1 : 2) + layers * (2 * d + 2 * d * d + 2 * d * kv + 3 * d * ffn) + d;
}

TEST(ModelConfigTest, PaperPresetsHaveTheAuthorsShapes) {
  auto llama500 = PresetConfig("llama-500m");
  EXPECT_EQ(llama500->n_layers, 16);
  EXPECT_EQ(llama500->max_seq_len, 4096);
  EXPECT_EQ(llama500->ParameterCount(), Count(16, 1536, 16, 8, 4096, 32000, false));
  EXPECT_EQ(llama500->ParameterCount(), 513'590'784);
  auto llama18 = PresetConfig("llama-1.8b");
  EXPECT_EQ(llama18->max_seq_len, 2048);
  EXPECT_EQ(llama18->ParameterCount(), Count(24, 2560, 32, 8, 6912, 128256, false));
  EXPECT_EQ(llama18->ParameterCount(), 2'324'032'000);
  auto gpt = PresetConfig("gpt-345m");
  EXPECT_EQ(gpt->vocab_size, 50257);  // GPT-2 BPE
  EXPECT_TRUE(gpt->tie_embeddings);
  EXPECT_EQ(gpt->ParameterCount(), Count(24, 1024, 16, 16, 2752, 50257, true));
  EXPECT_NEAR(gpt->ParameterCount(), 355e6, 5e6);
}

TEST(ModelConfigTest, UnknownPresetNamesTheKnownOnes) {
  auto config = PresetConfig("gpt-5");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("tiny"), std::string::npos);
}

TEST(ModelConfigTest, ValidationNamesTheField) {
  ModelConfig config;
  config.n_kv_heads = 3;
  EXPECT_NE(config.Validate().message().find("model.n_kv_heads"), std::string::npos);
  config = ModelConfig();
  config.d_model = 0;
  EXPECT_NE(config.Validate().message().find("model.d_model"), std::string::npos);
  config = ModelConfig();
  config.n_heads = 5;
  EXPECT_NE(config.Validate().message().find("model.n_heads"), std::string::npos);
}

TEST(ParameterLayoutTest, TensorsTileTheBufferAndTiedHeadSharesEmbedding) {
  ModelConfig config;
  ParameterLayout untied(config);
  int64_t next = 0;
  for (const TensorSlot& slot : untied.tensors()) {
    EXPECT_EQ(slot.offset, next) << slot.name;
    next += slot.size;
  }
  EXPECT_EQ(next, untied.total_size());
  EXPECT_NE(untied.lm_head(), untied.token_embedding());
  config.tie_embeddings = true;
  ParameterLayout tied(config);
  EXPECT_EQ(tied.lm_head(), tied.token_embedding());
  EXPECT_EQ(tied.total_size(), untied.total_size() - int64_t{config.vocab_size} * config.d_model);
}

}  // namespace
}  // namespace corescape::model
