// DeviceDenseOptimizer against the host optimizers. The same source runs on
// the CPU device-copies backend (in CI) and, built as
// device_dense_optimizer_gpu_test, on cuda:0.
#include "runtime/train/device_dense_optimizer.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/device/device.h"
#include "runtime/device/device_runtime.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/train/data_parallel_group.h"

namespace corescape::train {
namespace {

constexpr int64_t kSize = 10007;

class DeviceDenseOptimizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef CORESCAPE_DEVICE_DENSE_OPTIMIZER_ON_GPU
    // The GPU build of this test runs where cuda:0 exists and skips elsewhere.
    if (!device::OpenDevice(device::Device::Cuda(0)).ok()) {
      GTEST_SKIP() << "needs a CUDA build and a GPU";
    }
#endif
  }
};

std::unique_ptr<model::ModelOps> Backend(int64_t capacity_bytes = 0) {
#ifdef CORESCAPE_DEVICE_DENSE_OPTIMIZER_ON_GPU
  auto ops = model::OpenModelOps(device::Device::Cuda(0), model::Precision::kFp32, nullptr);
  EXPECT_TRUE(ops.ok()) << ops.status();
  return ops.ok() ? *std::move(ops) : nullptr;
#else
  return model::NewCpuModelOps(model::CpuParameterMode::kDeviceCopies, nullptr, capacity_bytes);
#endif
}

// The GPU sums the clipping norm in another order than the host: the norm
// agrees to ~1e-12 and the scale to one float ulp, so clipped runs are
// compared within a tolerance there and bitwise everywhere else.
#ifdef CORESCAPE_DEVICE_DENSE_OPTIMIZER_ON_GPU
constexpr bool kNormSummedLikeTheHost = false;
#else
constexpr bool kNormSummedLikeTheHost = true;
#endif

optim::DecayMask Decays() {
  optim::DecayMask mask(kSize);
  for (int64_t i = 0; i < kSize; ++i) mask[i] = i % 7 != 0;
  return mask;
}

std::vector<float> Random(uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(kSize);
  for (float& x : values) x = normal(rng);
  return values;
}

struct DeviceBuffers {
  device::DeviceBuffer params, grads;
};

DeviceBuffers Upload(model::ModelOps& ops, const std::vector<float>& params) {
  DeviceBuffers b;
  b.params = *ops.Allocate(kSize * sizeof(float));
  b.grads = *ops.Allocate(kSize * sizeof(float));
  EXPECT_TRUE(ops.Upload(b.params.data(), params.data(), kSize * sizeof(float)).ok());
  return b;
}

std::vector<float> Download(model::ModelOps& ops, const device::DeviceBuffer& buffer) {
  std::vector<float> values(kSize);
  EXPECT_TRUE(ops.Download(values.data(), buffer.data(), kSize * sizeof(float)).ok());
  return values;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, bool bitwise) {
  ASSERT_EQ(got.size(), want.size());
  if (bitwise) {
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i]) + 1e-7) << i;
  }
}

struct Case {
  const char* name;
  double grad_clip;
};

// Five steps of the device optimizer and the host one on the same
// gradients: parameters, moments, norms and the saved state agree.
TEST_F(DeviceDenseOptimizerTest, MatchesTheHostOptimizer) {
  for (const Case& c : {Case{"adamw", 0}, Case{"adamw", 0.5}, Case{"adams", 0}}) {
    SCOPED_TRACE(absl::StrCat(c.name, " clip ", c.grad_clip));
    const bool bitwise = c.grad_clip <= 0 || kNormSummedLikeTheHost;
    std::unique_ptr<model::ModelOps> ops = Backend();
    ASSERT_NE(ops, nullptr);
    SingleProcessGroup group;
    optim::OptimizerOptions options;
    options.name = c.name;
    options.grad_clip = c.grad_clip;
    auto host = optim::CreateOptimizer(options, &group, Decays());
    ASSERT_TRUE(host.ok()) << host.status();
    auto on_device = DeviceDenseOptimizer::Create(options, &group, ops.get(), Decays());
    ASSERT_TRUE(on_device.ok()) << on_device.status();
    EXPECT_EQ((*on_device)->name(), (*host)->name());

    std::vector<float> params = Random(1, 0.02f);
    DeviceBuffers device = Upload(*ops, params);
    for (int step = 0; step < 5; ++step) {
      std::vector<float> grads = Random(100 + step, 0.05f);
      ASSERT_TRUE(ops->Upload(device.grads.data(), grads.data(), kSize * sizeof(float)).ok());
      const double lr = 1e-3 * (step + 1);
      ASSERT_TRUE((*host)->Step(params.data(), grads.data(), kSize, lr).ok());
      absl::Status s = (*on_device)->Step(device.params.as<float>(), device.grads.as<float>(),
                                          kSize, lr);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ((*on_device)->step_count(), step + 1);
      EXPECT_EQ((*on_device)->last_step().step, step + 1);
      EXPECT_EQ((*on_device)->last_step().synced_values, kSize);
      EXPECT_NEAR((*on_device)->last_step().grad_norm, (*host)->last_step().grad_norm,
                  1e-9 * (*host)->last_step().grad_norm);
      ExpectClose(Download(*ops, device.params), params, bitwise);
    }
    ExpectClose((*on_device)->first_moment(), (*host)->first_moment(), bitwise);
    if (c.grad_clip > 0) {
      EXPECT_GT((*host)->last_step().grad_norm, c.grad_clip) << "the test wants clipping to bind";
    }

    // One state format: the device's state restores into the host
    // optimizer, which then steps like the device one.
    auto saved = (*on_device)->SaveState();
    ASSERT_TRUE(saved.ok()) << saved.status();
    if (bitwise) EXPECT_EQ(*saved, *(*host)->SaveState());
    auto restored = optim::CreateOptimizer(options, &group, Decays());
    ASSERT_TRUE(restored.ok());
    ASSERT_TRUE((*restored)->RestoreState(*saved).ok());
    std::vector<float> from_device = Download(*ops, device.params);
    std::vector<float> grads = Random(999, 0.05f);
    ASSERT_TRUE(ops->Upload(device.grads.data(), grads.data(), kSize * sizeof(float)).ok());
    ASSERT_TRUE((*restored)->Step(from_device.data(), grads.data(), kSize, 1e-3).ok());
    ASSERT_TRUE(
        (*on_device)->Step(device.params.as<float>(), device.grads.as<float>(), kSize, 1e-3).ok());
    ExpectClose(Download(*ops, device.params), from_device, kNormSummedLikeTheHost);

    // And the host's restores into a device one.
    auto second = DeviceDenseOptimizer::Create(options, &group, ops.get(), Decays());
    ASSERT_TRUE(second.ok());
    ASSERT_TRUE((*second)->RestoreState(*(*host)->SaveState()).ok());
    EXPECT_EQ((*second)->step_count(), 5);
    ExpectClose((*second)->first_moment(), (*host)->first_moment(), true);
  }
}

TEST_F(DeviceDenseOptimizerTest, RefusesWhatItCannotDo) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  SingleProcessGroup group;
  optim::OptimizerOptions options;
  options.name = "scape";
  auto sparse = DeviceDenseOptimizer::Create(options, &group, ops.get(), Decays());
  ASSERT_EQ(sparse.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sparse.status().message().find("'scape'"), std::string::npos) << sparse.status();

  options.name = "adamw";
  auto adamw = DeviceDenseOptimizer::Create(options, &group, ops.get(), Decays());
  ASSERT_TRUE(adamw.ok());
  DeviceBuffers device = Upload(*ops, Random(1, 0.02f));
  absl::Status wrong_size =
      (*adamw)->Step(device.params.as<float>(), device.grads.as<float>(), kSize - 1, 1e-3);
  EXPECT_EQ(wrong_size.code(), absl::StatusCode::kInvalidArgument) << wrong_size;

  options.name = "adams";
  auto adams = DeviceDenseOptimizer::Create(options, &group, ops.get(), Decays());
  ASSERT_TRUE(adams.ok());
  absl::Status foreign = (*adamw)->RestoreState(*(*adams)->SaveState());
  EXPECT_EQ(foreign.code(), absl::StatusCode::kFailedPrecondition) << foreign;
  EXPECT_EQ((*adamw)->RestoreState("not a state").code(), absl::StatusCode::kDataLoss);
}

#ifndef CORESCAPE_DEVICE_DENSE_OPTIMIZER_ON_GPU
// The state is the backend's memory: a backend that cannot hold it says so.
TEST_F(DeviceDenseOptimizerTest, StateBeyondTheBackendsMemoryIsResourceExhausted) {
  std::unique_ptr<model::ModelOps> ops = Backend(/*capacity_bytes=*/kSize * sizeof(float));
  SingleProcessGroup group;
  optim::OptimizerOptions options;
  auto adamw = DeviceDenseOptimizer::Create(options, &group, ops.get(), Decays());
  EXPECT_EQ(adamw.status().code(), absl::StatusCode::kResourceExhausted) << adamw.status();
}
#endif

}  // namespace
}  // namespace corescape::train
