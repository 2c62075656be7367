#include "runtime/local/local_trainer.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/data/test_util.h"
#include "runtime/device/device_runtime.h"
#include "runtime/train/grammar_corpus.h"

namespace corescape::local {
namespace {

using data::testing::TestPath;
using train::PrepareGrammarCorpus;

TEST(LocalTrainerTest, TinyModelLearnsBelowUnigramEntropy) {
  LocalTrainConfig config;
  config.model = "tiny";
  config.data = PrepareGrammarCorpus();
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
  // Every step's model FLOP rate; no MFU, a CPU having no known peak.
  for (const StepMetrics& m : steps) {
    EXPECT_GT(m.model_tflops_per_second, 0) << m.step;
    EXPECT_EQ(m.mfu, 0) << m.step;
  }
  EXPECT_GT(summary->model_tflops_per_second, 0);
  EXPECT_EQ(summary->mfu, 0);

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

// Given a peak, the MFU is each step's model FLOP rate over it.
TEST(LocalTrainerTest, PeakGivesTheMfu) {
  LocalTrainConfig config;
  config.model = "tiny";
  config.data = PrepareGrammarCorpus();
  config.seq_len = 32;
  config.micro_batch = 2;
  config.steps = 3;
  config.eval_batches = 1;
  config.peak_tflops = 0.25;
  std::vector<StepMetrics> steps;
  auto summary = RunLocalTraining(config, [&](const StepMetrics& m) { steps.push_back(m); });
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_EQ(steps.size(), 3u);
  for (const StepMetrics& m : steps) {
    EXPECT_GT(m.mfu, 0);
    EXPECT_DOUBLE_EQ(m.mfu, m.model_tflops_per_second / 0.25);
  }
  EXPECT_DOUBLE_EQ(summary->mfu, summary->model_tflops_per_second / 0.25);
}

TEST(LocalTrainerTest, BadConfigNamesTheField) {
  LocalTrainConfig config;
  config.data = PrepareGrammarCorpus();  // resolving the job checks that it exists
  config.micro_batch = 0;
  EXPECT_NE(config.Validate().message().find("micro_batch"), std::string::npos);
  config.micro_batch = 4;
  config.peak_tflops = -1;
  EXPECT_NE(config.Validate().message().find("peak_tflops"), std::string::npos);
  config.peak_tflops = 0;
  EXPECT_EQ(ParseLocalTrainConfig(R"({"peak_tflops": 989})", config, "job.json")->peak_tflops, 989);
  config.seq_len = 100000;
  EXPECT_NE(config.Validate().message().find("seq_len"), std::string::npos);
  config.seq_len = 64;
  config.model = "huge";
  EXPECT_NE(config.Validate().message().find("model.preset"), std::string::npos);
  config.model = "tiny";
  const std::string dataset = config.data;
  config.data = "/nonexistent";
  EXPECT_NE(config.Validate().message().find("data: no dataset at /nonexistent"),
            std::string::npos)
      << config.Validate();
  auto summary = RunLocalTraining(config, nullptr);
  EXPECT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("/nonexistent"), std::string::npos)
      << summary.status();
  config.data = dataset;

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

  // SCAPE's rule reaches the job spec; an unknown one is named.
  parsed = ParseLocalTrainConfig(R"({"optimizer": "scape", "scape_rule": "reference"})", config,
                                 "job.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ToJobSpec().optimizer().scape().rule(), "reference");
  parsed->scape_rule = "lazy";
  EXPECT_NE(parsed->Validate().message().find("scape_rule"), std::string::npos)
      << parsed->Validate();

  // Residual offload reaches the spec with the reference rule and the
  // default catch-up rule; elsewhere it is refused by name, as is a value
  // that is not a boolean.
  parsed = ParseLocalTrainConfig(
      R"({"optimizer": "scape", "scape_rule": "reference", "offload_residuals": true})", config,
      "job.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->ToJobSpec().optimizer().scape().offload_residuals());
  EXPECT_TRUE(parsed->Validate().ok()) << parsed->Validate();
  parsed->scape_rule = "catch-up";
  EXPECT_TRUE(parsed->Validate().ok()) << parsed->Validate();
  // A research rule that lost the formulation search is refused with where it went.
  parsed->scape_rule = "linearized";
  EXPECT_NE(parsed->Validate().message().find("scape_rule: SCAPE rule 'linearized'"),
            std::string::npos)
      << parsed->Validate();
  EXPECT_NE(parsed->Validate().message().find("docs/scape_search.md"), std::string::npos)
      << parsed->Validate();
  parsed->scape_rule = "";
  parsed->optimizer = "adamw";
  EXPECT_NE(parsed->Validate().message().find("offload_residuals: 'adamw' keeps all its state"),
            std::string::npos)
      << parsed->Validate();
  parsed = ParseLocalTrainConfig(R"({"offload_residuals": "yes"})", config, "job.json");
  EXPECT_NE(parsed.status().message().find("offload_residuals: expected true or false"),
            std::string::npos)
      << parsed.status();
}

TEST(LocalTrainerTest, DeviceAndPrecisionAreValidatedAndNamed) {
  LocalTrainConfig config;
  config.data = PrepareGrammarCorpus();
  config.device = "gpu";
  EXPECT_NE(config.Validate().message().find("device"), std::string::npos) << config.Validate();
  config.device = "cpu";
  config.precision = "bf16";
  EXPECT_NE(config.Validate().message().find("bf16 needs a GPU"), std::string::npos)
      << config.Validate();
  config.precision = "fp8";
  EXPECT_NE(config.Validate().message().find("precision"), std::string::npos);
  config.precision = "";
  config.device = "cuda:1";
  EXPECT_TRUE(config.Validate().ok()) << config.Validate();
  EXPECT_EQ(config.TrainingDevice().ToString(), "cuda:1");
  EXPECT_EQ(config.TrainingPrecision(), model::Precision::kBf16);
  EXPECT_EQ(config.ToJobSpec().device(), v1::CUDA);
  auto parsed = ParseLocalTrainConfig(R"({"device": "cuda:0", "precision": "fp32"})", config,
                                      "job.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->TrainingPrecision(), model::Precision::kFp32);
}

TEST(LocalTrainerTest, CudaWithoutAGpuIsRefusedWithTheReason) {
  if (device::CudaCompiledIn() && device::OpenDevice(device::Device::Cuda(0)).ok()) {
    GTEST_SKIP() << "a GPU is present: local_trainer_gpu_test trains on it";
  }
  LocalTrainConfig config;
  config.model = "tiny";
  config.data = PrepareGrammarCorpus();
  config.seq_len = 32;
  config.steps = 1;
  config.device = "cuda:0";
  auto summary = RunLocalTraining(config, nullptr);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), absl::StatusCode::kFailedPrecondition) << summary.status();
  EXPECT_NE(summary.status().message().find("cuda:0"), std::string::npos) << summary.status();
}

}  // namespace
}  // namespace corescape::local
