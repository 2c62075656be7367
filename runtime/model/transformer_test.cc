// The training step through ModelOps on the CPU: the device-copies backend
// (a GPU backend's data flow over the CPU kernels) gives the in-place
// backend's bits, out-of-memory is an error, and backends are chosen by
// device and precision.
#include "runtime/model/transformer.h"

#include <cstring>
#include <random>

#include "gtest/gtest.h"
#include "runtime/device/device.h"
#include "runtime/model/cpu_execution_for_test.h"
#include "runtime/model/model_ops.h"
#include "runtime/model/model_test_util.h"

namespace corescape::model {
namespace {

ModelConfig TestConfig() { return SmallModelConfig(24); }

std::vector<ModelBatch> TestBatches(const ModelConfig& config) {
  std::mt19937 rng(5);
  return {RandomPackedBatch(rng, config, 2, 24), RandomPackedBatch(rng, config, 3, 16)};
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

absl::StatusOr<TrainingRun> TrainWith(std::shared_ptr<ModelOps> ops, int steps) {
  const ModelConfig config = TestConfig();
  auto model = Transformer::Create(config, ops);
  if (!model.ok()) return model.status();
  model->InitializeWeights(3);
  return RunTrainingSteps(*model, ops->local_attention(), TestBatches(config), steps, 0.5f);
}

TEST(TransformerTest, DeviceCopiesGiveTheInPlaceBits) {
  auto in_place = TrainWith(NewCpuModelOps(CpuParameterMode::kInPlace, nullptr), 3);
  auto copies = TrainWith(NewDeviceCopiesForTest(), 3);
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  ASSERT_TRUE(copies.ok()) << copies.status();
  ASSERT_EQ(in_place->losses.size(), 3u);
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(in_place->losses[step], copies->losses[step]) << "step " << step;
    EXPECT_TRUE(SameBits(in_place->gradients[step], copies->gradients[step])) << "step " << step;
  }
  EXPECT_TRUE(SameBits(in_place->parameters, copies->parameters));
  // The updates reached the device copy: later steps' losses moved.
  EXPECT_NE(copies->losses[0], copies->losses[2]);
}

TEST(TransformerTest, DeviceCopiesWithoutDownloadLeaveHostGradientsZero) {
  const ModelConfig config = TestConfig();
  std::shared_ptr<ModelOps> ops = NewDeviceCopiesForTest();
  auto model = Transformer::Create(config, ops);
  ASSERT_TRUE(model.ok());
  model->InitializeWeights(3);
  ASSERT_TRUE(model->ZeroGradients().ok());
  Activations activations;
  ASSERT_TRUE(model->Forward(TestBatches(config)[0], ops->local_attention(), activations).ok());
  ASSERT_TRUE(model->Backward(ops->local_attention(), activations, 1e-3f).ok());
  double host_sum = 0.0;
  for (float g : model->gradients()) host_sum += std::abs(g);
  EXPECT_EQ(host_sum, 0.0);
  ASSERT_TRUE(model->DownloadGradients().ok());
  for (float g : model->gradients()) host_sum += std::abs(g);
  EXPECT_GT(host_sum, 0.0);
}

TEST(TransformerTest, TooSmallADeviceIsResourceExhausted) {
  // Room for the parameters, not for the activations of a batch.
  const ModelConfig config = TestConfig();
  const int64_t parameter_bytes = ParameterLayout(config).total_size() * sizeof(float);
  std::shared_ptr<ModelOps> ops =
      NewDeviceCopiesForTest(3 * parameter_bytes);
  auto model = Transformer::Create(config, ops);
  ASSERT_TRUE(model.ok());
  model->InitializeWeights(3);
  Activations activations;
  auto loss = model->Forward(TestBatches(config)[0], ops->local_attention(), activations);
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kResourceExhausted) << loss.status();
}

TEST(TransformerTest, ActivationsOfAnotherBackendAreRefused) {
  const ModelConfig config = TestConfig();
  std::shared_ptr<ModelOps> first = NewCpuModelOps(CpuParameterMode::kInPlace, nullptr);
  std::shared_ptr<ModelOps> second = NewCpuModelOps(CpuParameterMode::kInPlace, nullptr);
  auto a = Transformer::Create(config, first);
  auto b = Transformer::Create(config, second);
  ASSERT_TRUE(a.ok() && b.ok());
  Activations activations;
  ASSERT_TRUE(a->Forward(TestBatches(config)[0], first->local_attention(), activations).ok());
  auto loss = b->Forward(TestBatches(config)[0], second->local_attention(), activations);
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelOpsTest, BackendsByDeviceAndPrecision) {
  auto cpu = OpenModelOps(device::Device::Cpu(), Precision::kFp32, nullptr);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE((*cpu)->parameters_in_place());
  EXPECT_TRUE((*cpu)->host_addressable());

  auto cpu_bf16 = OpenModelOps(device::Device::Cpu(), Precision::kBf16, nullptr);
  ASSERT_FALSE(cpu_bf16.ok());
  EXPECT_EQ(cpu_bf16.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cpu_bf16.status().message().find("needs a GPU"), std::string::npos);

  auto gpu = device::ParseDevice("cuda:0");
  ASSERT_TRUE(gpu.ok());
  auto cuda = OpenModelOps(*gpu, Precision::kBf16, nullptr);
  if (!device::CudaCompiledIn()) {
    ASSERT_FALSE(cuda.ok());
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(cuda.status().message().find("--config=cuda"), std::string::npos)
        << cuda.status();
  } else if (!cuda.ok()) {
    // A CUDA build on a machine without that GPU says so.
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kFailedPrecondition) << cuda.status();
  }

  EXPECT_EQ(DefaultPrecision(device::Device::Cpu()), Precision::kFp32);
  EXPECT_EQ(DefaultPrecision(*gpu), Precision::kBf16);
  EXPECT_EQ(*ParsePrecision("bf16"), Precision::kBf16);
  EXPECT_EQ(PrecisionName(*ParsePrecision("fp32")), "fp32");
  EXPECT_FALSE(ParsePrecision("fp16").ok());
}

}  // namespace
}  // namespace corescape::model
