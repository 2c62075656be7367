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
  EXPECT_NEAR(PresetConfig("llama-1.8b")->ParameterCount(), 1.8e9, 0.25e9);
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
