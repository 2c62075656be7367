// 50 steps of `small` on cuda:0 (bf16 GEMMs) descend like the same run on
// the CPU. Skips without a GPU; one skipped test in a build without CUDA.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device/cuda_device_runtime.h"
#include "runtime/train/grammar_corpus.h"
#include "runtime/local/local_trainer.h"

namespace corescape::local {
namespace {

using train::PrepareGrammarCorpus;

LocalTrainSummary Train(const std::string& data, const std::string& device,
                        std::vector<double>& losses, LocalTrainConfig config = {}) {
  config.model = "small";
  config.data = data;
  config.seq_len = 128;
  config.micro_batch = 8;
  config.steps = 50;
  config.warmup = 5;
  config.lr = 1e-3;
  config.eval_interval = 0;
  config.device = device;
  auto summary = RunLocalTraining(config, [&](const StepMetrics& m) { losses.push_back(m.train_loss); });
  EXPECT_TRUE(summary.ok()) << device << ": " << summary.status();
  return summary.value_or(LocalTrainSummary{});
}

TEST(LocalTrainerGpuTest, SmallDescendsLikeTheCpuRun) {
  if (device::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  const std::string data = PrepareGrammarCorpus(2000);
  std::vector<double> cpu_losses, gpu_losses;
  const LocalTrainSummary cpu = Train(data, "cpu", cpu_losses);
  const LocalTrainSummary gpu = Train(data, "cuda:0", gpu_losses);
  ASSERT_EQ(gpu_losses.size(), 50u);
  ASSERT_EQ(cpu_losses.size(), 50u);
  // Both learn the grammar well below where they started...
  EXPECT_LT(gpu.final_val_loss, gpu.first_val_loss - 1.0);
  EXPECT_LT(cpu.final_val_loss, cpu.first_val_loss - 1.0);
  // ...and the GPU run stays on the CPU run's curve.
  EXPECT_NEAR(gpu.final_val_loss, cpu.final_val_loss, 0.05 * cpu.final_val_loss);
  for (int step : {0, 9, 24, 49}) {
    EXPECT_NEAR(gpu_losses[step], cpu_losses[step], 0.05 * cpu_losses[step]) << "step " << step;
  }
  RecordProperty("cpu_tokens_per_second", static_cast<int>(cpu.tokens_per_second));
  RecordProperty("gpu_tokens_per_second", static_cast<int>(gpu.tokens_per_second));
}

// On the GPU in fp32: SCAPE at density 1 (its default rule's state on the
// GPU, every window one step) trains like dense AdamS. The two differ by
// fp32 rounding ((1−β1)·Σg/(1−β1) vs Σg), which training amplifies: the
// same pair on the CPU agrees to 1e-6 through step 10, 0.4% at step 25
// and 4% at step 50, so the first ten steps are held to 1e-3 and the rest
// to the curve.
TEST(LocalTrainerGpuTest, ScapeAtDensityOneTrainsLikeAdamSOnTheGpu) {
  if (device::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  const std::string data = PrepareGrammarCorpus(2000);
  LocalTrainConfig config;
  config.precision = "fp32";
  config.density = 1.0;
  std::vector<double> adams_losses, scape_losses;
  config.optimizer = "adams";
  const LocalTrainSummary adams = Train(data, "cuda:0", adams_losses, config);
  config.optimizer = "scape";
  const LocalTrainSummary scape = Train(data, "cuda:0", scape_losses, config);
  ASSERT_EQ(adams_losses.size(), 50u);
  ASSERT_EQ(scape_losses.size(), 50u);
  for (int step = 0; step < 10; ++step) {
    EXPECT_NEAR(scape_losses[step], adams_losses[step], 1e-3 * adams_losses[step])
        << "step " << step;
  }
  for (int step : {24, 49}) {
    EXPECT_NEAR(scape_losses[step], adams_losses[step], 0.15 * adams_losses[step])
        << "step " << step;
  }
  EXPECT_LT(scape.final_val_loss, scape.first_val_loss - 1.0);
  EXPECT_NEAR(scape.final_val_loss, adams.final_val_loss, 0.15 * adams.final_val_loss);
}

// SCAPE's reference rule with its state on the GPU (its mask selection and
// exchange on the host) descends like the same run on the CPU.
TEST(LocalTrainerGpuTest, ScapeReferenceOnTheGpuDescendsLikeTheCpuRun) {
  if (device::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  const std::string data = PrepareGrammarCorpus(2000);
  LocalTrainConfig config;
  config.optimizer = "scape";
  config.scape_rule = "reference";
  config.density = 0.1;
  std::vector<double> cpu_losses, gpu_losses;
  const LocalTrainSummary cpu = Train(data, "cpu", cpu_losses, config);
  const LocalTrainSummary gpu = Train(data, "cuda:0", gpu_losses, config);
  ASSERT_EQ(gpu_losses.size(), 50u);
  EXPECT_LT(gpu.final_val_loss, gpu.first_val_loss - 1.0);
  EXPECT_NEAR(gpu.final_val_loss, cpu.final_val_loss, 0.05 * cpu.final_val_loss);
  for (int step : {0, 9, 24, 49}) {
    EXPECT_NEAR(gpu_losses[step], cpu_losses[step], 0.05 * cpu_losses[step]) << "step " << step;
  }
}

}  // namespace
}  // namespace corescape::local
