// The training step on cuda:0 against the CPU backend (the reference):
// `tiny` and `small`, fp32 and bf16 GEMMs. Skips without a GPU; in a build
// without CUDA it is one skipped test (cuda_disabled_test).
#include <cmath>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "runtime/device/cuda_device_runtime.h"
#include "runtime/device/device.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_ops.h"
#include "runtime/model/model_test_util.h"
#include "runtime/model/transformer.h"

namespace corescape::model {
namespace {

struct Case {
  std::string preset;
  Precision precision;
  // Relative loss tolerance: fp32 on both sides differs only in summation
  // order (cuBLAS, the attention kernel's tiles); bf16 rounds every GEMM
  // input to 8 bits of mantissa.
  double loss_tolerance;
};

class TransformerGpuTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (device::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA GPU on this machine";
  }
};

std::vector<ModelBatch> Batches(const ModelConfig& config) {
  std::mt19937 rng(9);
  const int seq = std::min(config.max_seq_len, 256);
  return {RandomPackedBatch(rng, config, 4, seq), RandomPackedBatch(rng, config, 2, seq)};
}

TEST_P(TransformerGpuTest, StepMatchesTheCpuBackend) {
  const Case& c = GetParam();
  auto config = PresetConfig(c.preset);
  ASSERT_TRUE(config.ok());
  const std::vector<ModelBatch> batches = Batches(*config);
  constexpr int kSteps = 3;

  std::shared_ptr<ModelOps> cpu_ops = NewCpuModelOps(CpuParameterMode::kInPlace, nullptr);
  auto cpu_model = Transformer::Create(*config, cpu_ops);
  ASSERT_TRUE(cpu_model.ok());
  cpu_model->InitializeWeights(21);
  auto cpu = RunTrainingSteps(*cpu_model, cpu_ops->local_attention(), batches, kSteps, 0.05f);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  auto gpu_ops = OpenModelOps(device::Device::Cuda(0), c.precision, nullptr);
  ASSERT_TRUE(gpu_ops.ok()) << gpu_ops.status();
  std::shared_ptr<ModelOps> ops = *std::move(gpu_ops);
  auto gpu_model = Transformer::Create(*config, ops);
  ASSERT_TRUE(gpu_model.ok());
  gpu_model->InitializeWeights(21);
  auto gpu = RunTrainingSteps(*gpu_model, ops->local_attention(), batches, kSteps, 0.05f);
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  for (int step = 0; step < kSteps; ++step) {
    const double relative = std::abs(gpu->losses[step] - cpu->losses[step]) / cpu->losses[step];
    EXPECT_LE(relative, c.loss_tolerance)
        << "step " << step << ": gpu " << gpu->losses[step] << " cpu " << cpu->losses[step];
    for (const TensorSlot& slot : cpu_model->layout().tensors()) {
      const double cosine = Cosine(gpu->gradients[step].data() + slot.offset,
                                   cpu->gradients[step].data() + slot.offset, slot.size);
      EXPECT_GE(cosine, 0.999) << "step " << step << " gradient of " << slot.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    PresetsAndPrecisions, TransformerGpuTest,
    ::testing::Values(Case{"tiny", Precision::kFp32, 1e-5}, Case{"tiny", Precision::kBf16, 1e-2},
                      Case{"small", Precision::kFp32, 1e-5},
                      Case{"small", Precision::kBf16, 1e-2}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return info.param.preset + "_" + std::string(PrecisionName(info.param.precision));
    });

}  // namespace
}  // namespace corescape::model
