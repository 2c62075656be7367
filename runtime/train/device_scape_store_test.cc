// SCAPE's reference rule with its state in a model backend (DeviceScapeStore)
// against the same optimizer on the host. The same source runs on the CPU
// device-copies backend (in CI) and, built as device_scape_store_gpu_test,
// on cuda:0.
#include "runtime/train/device_scape_store.h"

#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/device/device.h"
#include "runtime/device/device_runtime.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/scape_optimizer.h"
#include "runtime/train/data_parallel_group.h"

namespace corescape::train {
namespace {

constexpr int64_t kSize = 6000;
const std::vector<int64_t> kTensorBounds = {0, 2000, 2100, 6000};

using Placement = DeviceScapeStore::ResidualPlacement;
// Offloaded residuals go through staging chunks that do not divide the
// buffer, so the last chunk is partial.
constexpr int64_t kStagingFloats = 1536;

class DeviceScapeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef CORESCAPE_DEVICE_SCAPE_STORE_ON_GPU
    if (!device::OpenDevice(device::Device::Cuda(0)).ok()) {
      GTEST_SKIP() << "needs a CUDA build and a GPU";
    }
#endif
  }
};

std::unique_ptr<model::ModelOps> Backend() {
#ifdef CORESCAPE_DEVICE_SCAPE_STORE_ON_GPU
  auto ops = model::OpenModelOps(device::Device::Cuda(0), model::Precision::kFp32, nullptr);
  EXPECT_TRUE(ops.ok()) << ops.status();
  return ops.ok() ? *std::move(ops) : nullptr;
#else
  return model::NewCpuModelOps(model::CpuParameterMode::kDeviceCopies, nullptr);
#endif
}

optim::DecayMask Decays() {
  optim::DecayMask mask(kSize, 1);
  for (int64_t i = 2000; i < 2100; ++i) mask[i] = 0;  // a norm gain
  return mask;
}

std::vector<float> Random(uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(kSize);
  for (float& x : values) x = normal(rng);
  return values;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct StoreCase {
  Placement placement;
  bool dense_small_tensors;  // the norm gain sent whole beside the ranked tensors
  const char* name;
};
void PrintTo(const StoreCase& c, std::ostream* os) { *os << c.name; }

class DeviceScapeStorePlacementTest : public DeviceScapeStoreTest,
                                      public ::testing::WithParamInterface<StoreCase> {};

// Six steps: the first mask chosen synchronously, sparse steps, a dense
// refresh, a residual sync; then a checkpoint of the device form restores
// into the host form. The clipping norm is summed in another order on a
// GPU, so the GPU build runs without clipping (then every bit agrees).
// With the residual in pinned host memory every bit is the same too. On
// the device the masks are ranked there (ModelOps::SelectLargestMagnitudes),
// offloaded on the host.
TEST_P(DeviceScapeStorePlacementTest, ReferenceRuleMatchesTheHostOptimizerBitwise) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  optim::ScapeConfig config;
  config.rule = optim::ScapeRule::kReference;
  config.density = 0.05;
  config.dense_refresh_interval = 4;
  config.residual_sync_period = 3;
  config.dense_small_tensors = GetParam().dense_small_tensors;
#ifdef CORESCAPE_DEVICE_SCAPE_STORE_ON_GPU
  config.grad_clip = 0;
#else
  config.grad_clip = 0.5;
#endif
  SingleProcessGroup group;
  auto host = optim::ScapeOptimizer::Create(&group, config, Decays(), kTensorBounds);
  ASSERT_TRUE(host.ok()) << host.status();
  auto store = DeviceScapeStore::Create(ops.get(), Decays(), GetParam().placement, kStagingFloats);
  ASSERT_TRUE(store.ok()) << store.status();
  auto on_device =
      optim::ScapeOptimizer::Create(&group, config, Decays(), kTensorBounds, *std::move(store));
  ASSERT_TRUE(on_device.ok()) << on_device.status();

  std::vector<float> params = Random(1, 0.02f);
  auto device_params = ops->Allocate(kSize * sizeof(float));
  auto device_grads = ops->Allocate(kSize * sizeof(float));
  ASSERT_TRUE(device_params.ok() && device_grads.ok());
  ASSERT_TRUE(ops->Upload(device_params->data(), params.data(), kSize * sizeof(float)).ok());
  std::vector<float> downloaded(kSize);
  for (int step = 0; step < 6; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step + 1));
    std::vector<float> grads = Random(100 + step, 0.05f);
    ASSERT_TRUE(ops->Upload(device_grads->data(), grads.data(), kSize * sizeof(float)).ok());
    const double lr = 1e-3;
    ASSERT_TRUE((*host)->Step(params.data(), grads.data(), kSize, lr).ok());
    absl::Status s =
        (*on_device)->Step(device_params->as<float>(), device_grads->as<float>(), kSize, lr);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ((*on_device)->last_step().dense, (*host)->last_step().dense);
    EXPECT_EQ((*on_device)->last_step().synced_values, (*host)->last_step().synced_values);
    EXPECT_EQ((*on_device)->last_step().grad_norm, (*host)->last_step().grad_norm);
    ASSERT_TRUE(ops->Download(downloaded.data(), device_params->data(), kSize * sizeof(float)).ok());
    ASSERT_TRUE(SameBits(downloaded, params));
    ASSERT_TRUE(SameBits((*on_device)->first_moment(), (*host)->first_moment()));
    ASSERT_TRUE(SameBits((*on_device)->residual(), (*host)->residual()));
    EXPECT_EQ((*on_device)->current_mask().indices, (*host)->current_mask().indices);
  }

  // One state format: the device form's checkpoint is the host form's.
  auto saved = (*on_device)->SaveState();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, *(*host)->SaveState());
  auto restored = optim::ScapeOptimizer::Create(
      &group, config, Decays(), kTensorBounds,
      *DeviceScapeStore::Create(ops.get(), Decays(), GetParam().placement, kStagingFloats));
  ASSERT_TRUE(restored.ok());
  ASSERT_TRUE((*restored)->RestoreState(*saved).ok());
  EXPECT_TRUE(SameBits((*restored)->residual(), (*host)->residual()));
  EXPECT_TRUE(SameBits((*restored)->first_moment(), (*host)->first_moment()));
}

INSTANTIATE_TEST_SUITE_P(Placements, DeviceScapeStorePlacementTest,
                         ::testing::Values(StoreCase{Placement::kDevice, false, "ResidualOnDevice"},
                                           StoreCase{Placement::kDevice, true,
                                                     "ResidualOnDeviceSmallTensorsWhole"},
                                           StoreCase{Placement::kPinnedHost, false,
                                                     "ResidualOffloaded"}),
                         [](const ::testing::TestParamInfo<StoreCase>& info) {
                           return std::string(info.param.name);
                         });

#ifndef CORESCAPE_DEVICE_SCAPE_STORE_ON_GPU
// What offloading is for: a device that holds m, the values and two small
// staging chunks but not the residual too.
TEST_F(DeviceScapeStoreTest, OffloadedResidualsLeaveTheirBytesOffTheDevice) {
  // m, values: 24576 bytes each in the allocator's size classes; the decay
  // bytes 6144; two staging chunks of 256 floats, 1024 each: 57344 in all,
  // where on-device residuals need 79872.
  constexpr int64_t kCapacity = 65536;
  auto full = model::NewCpuModelOps(model::CpuParameterMode::kDeviceCopies, nullptr, kCapacity);
  auto on_device = DeviceScapeStore::Create(full.get(), Decays(), Placement::kDevice);
  EXPECT_EQ(on_device.status().code(), absl::StatusCode::kResourceExhausted) << on_device.status();
  auto ops = model::NewCpuModelOps(model::CpuParameterMode::kDeviceCopies, nullptr, kCapacity);
  auto offloaded = DeviceScapeStore::Create(ops.get(), Decays(), Placement::kPinnedHost, 256);
  EXPECT_TRUE(offloaded.ok()) << offloaded.status();
  EXPECT_EQ(DeviceScapeStore::Create(ops.get(), Decays(), Placement::kPinnedHost, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}
#endif

TEST_F(DeviceScapeStoreTest, OnlyTheReferenceRuleKeepsItsStateOnADevice) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  optim::ScapeConfig config;
  config.rule = optim::ScapeRule::kCatchUp;
  SingleProcessGroup group;
  auto optimizer = optim::ScapeOptimizer::Create(&group, config, Decays(), kTensorBounds,
                                                 *DeviceScapeStore::Create(ops.get(), Decays()));
  ASSERT_EQ(optimizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(optimizer.status().message().find("catch-up"), std::string::npos)
      << optimizer.status();
  optim::OptimizerOptions options;
  options.name = "scape";
  EXPECT_FALSE(DeviceScapeStore::Supports(options));
  options.scape.rule = optim::ScapeRule::kReference;
  EXPECT_TRUE(DeviceScapeStore::Supports(options));
  options.name = "adams";
  EXPECT_FALSE(DeviceScapeStore::Supports(options));
}

}  // namespace
}  // namespace corescape::train
