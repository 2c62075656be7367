#include "runtime/train/local_trainer.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/data/prepare.h"
#include "runtime/data/test_util.h"

namespace corescape::train {
namespace {

using data::testing::TestPath;

// A corpus with learnable structure: short sentences from a small grammar,
// separated by '%' lines like the fortunes files.
std::string PrepareCorpus() {
  const std::vector<std::string> subjects = {"the cat", "a dog", "my friend", "the old man"};
  const std::vector<std::string> verbs = {"sees", "likes", "follows", "remembers"};
  const std::vector<std::string> objects = {"the moon.", "a red ball.", "the river.", "its home."};
  std::string text;
  uint32_t state = 7;
  for (int doc = 0; doc < 400; ++doc) {
    const int sentences = 1 + doc % 3;
    for (int s = 0; s < sentences; ++s) {
      state = state * 1664525u + 1013904223u;
      text += subjects[(state >> 8) % 4] + " " + verbs[(state >> 12) % 4] + " " +
              objects[(state >> 16) % 4] + "\n";
    }
    text += "%\n";
  }
  data::PrepareOptions options;
  options.validation_fraction = 0.1;
  absl::StatusOr<std::string> dataset = data::testing::PrepareTestDataset(text, options);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return dataset.value_or("");
}

TEST(LocalTrainerTest, TinyModelLearnsBelowUnigramEntropy) {
  LocalTrainConfig config;
  config.model = "tiny";
  config.data = PrepareCorpus();
  config.seq_len = 64;
  config.micro_batch = 4;
  config.steps = 80;
  config.warmup = 10;
  config.lr = 3e-3;
  config.eval_interval = 40;
  config.threads = 2;
  config.metrics_out = TestPath("metrics.csv");
  std::vector<StepMetrics> steps;
  auto summary = RunLocalTraining(config, [&](const StepMetrics& m) { steps.push_back(m); });
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(steps.size(), 80u);
  EXPECT_GT(steps[39].val_loss, 0);   // evaluated at the interval
  EXPECT_LT(steps[40].val_loss, 0);   // and not in between
  EXPECT_LT(summary->final_val_loss, summary->first_val_loss - 1.0);
  EXPECT_LT(summary->final_val_loss, summary->unigram_entropy);

  // The CSV has a header, one line per step, and empty val_loss off-interval.
  std::ifstream csv(config.metrics_out);
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("step,train_loss,val_loss,tokens_per_s", 0), 0u) << line;
  int lines = 0;
  std::string second;
  while (std::getline(csv, line)) {
    if (++lines == 2) second = line;
  }
  EXPECT_EQ(lines, 80);
  EXPECT_NE(second.find(",,"), std::string::npos) << second;
}

TEST(LocalTrainerTest, BadConfigNamesTheField) {
  LocalTrainConfig config;
  config.data = "/nonexistent";
  config.micro_batch = 0;
  EXPECT_NE(config.Validate().message().find("micro_batch"), std::string::npos);
  config.micro_batch = 4;
  config.seq_len = 100000;
  EXPECT_NE(config.Validate().message().find("seq_len"), std::string::npos);
  config.seq_len = 64;
  config.model = "huge";
  EXPECT_NE(config.Validate().message().find("model.preset"), std::string::npos);
  config.model = "tiny";
  auto summary = RunLocalTraining(config, nullptr);
  EXPECT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("/nonexistent"), std::string::npos)
      << summary.status();

  auto parsed = ParseLocalTrainConfig(R"({"steps": "many"})", config, "job.json");
  EXPECT_NE(parsed.status().message().find("steps"), std::string::npos);
  parsed = ParseLocalTrainConfig(R"({"stepz": 3})", config, "job.json");
  EXPECT_NE(parsed.status().message().find("unknown key 'stepz'"), std::string::npos);
  parsed = ParseLocalTrainConfig("{not json", config, "job.json");
  EXPECT_NE(parsed.status().message().find("job.json"), std::string::npos);
  parsed = ParseLocalTrainConfig(R"({"steps": 12, "lr": 0.01})", config, "job.json");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->steps, 12);
  EXPECT_EQ(parsed->lr, 0.01);
}

}  // namespace
}  // namespace corescape::train
