// SCAPE's reference and catch-up rules with their state in a model backend
// (DeviceScapeStore) against the same optimizer on the host. The same source
// runs on the CPU device-copies backend (in CI: its kernels run at once, and
// in the _deferred and _copies_ahead twins queued as a GPU's are) and, built
// as device_scape_store_gpu_test, on cuda:0.
#include "runtime/train/device_scape_store.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/device/caching_allocator.h"
#include "runtime/device/device.h"
#include "runtime/device/device_runtime.h"
#include "runtime/optim/optim_scalars.h"
#include "runtime/model/cpu_execution_for_test.h"
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
  return model::NewDeviceCopiesForTest();
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

// The host optimizer and the same configuration over a device store, each
// with its own copy of the same initial parameters, and the backend's
// gradient buffer.
struct HostAndDeviceRun {
  std::unique_ptr<optim::ScapeOptimizer> host, on_device;
  DeviceScapeStore* store = nullptr;  // on_device's
  std::vector<float> params;  // the host optimizer's
  device::DeviceBuffer device_params, device_grads;
};

void StartRun(model::ModelOps* ops, optim::RankGroup* group, const optim::ScapeConfig& config,
              absl::StatusOr<std::unique_ptr<DeviceScapeStore>> store, HostAndDeviceRun& run) {
  auto host = optim::ScapeOptimizer::Create(group, config, Decays(), kTensorBounds);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE(store.ok()) << store.status();
  run.store = store->get();
  auto on_device =
      optim::ScapeOptimizer::Create(group, config, Decays(), kTensorBounds, *std::move(store));
  ASSERT_TRUE(on_device.ok()) << on_device.status();
  run.host = *std::move(host);
  run.on_device = *std::move(on_device);
  run.params = Random(1, 0.02f);
  auto device_params = ops->Allocate(kSize * sizeof(float));
  auto device_grads = ops->Allocate(kSize * sizeof(float));
  ASSERT_TRUE(device_params.ok() && device_grads.ok());
  run.device_params = *std::move(device_params);
  run.device_grads = *std::move(device_grads);
  ASSERT_TRUE(ops->Upload(run.device_params.data(), run.params.data(), kSize * sizeof(float)).ok());
}

// Step `step` (from 0) of both with the same gradients; then the
// parameters, m, e and the step's mask agree bit for bit.
void StepBoth(model::ModelOps* ops, HostAndDeviceRun& run, int step, double lr) {
  std::vector<float> grads = Random(100 + step, 0.05f);
  ASSERT_TRUE(ops->Upload(run.device_grads.data(), grads.data(), kSize * sizeof(float)).ok());
  ASSERT_TRUE(run.host->Step(run.params.data(), grads.data(), kSize, lr).ok());
  absl::Status s = run.on_device->Step(run.device_params.as<float>(),
                                       run.device_grads.as<float>(), kSize, lr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(run.on_device->last_step().dense, run.host->last_step().dense);
  EXPECT_EQ(run.on_device->last_step().synced_values, run.host->last_step().synced_values);
#ifdef CORESCAPE_DEVICE_SCAPE_STORE_ON_GPU
  // The norm is summed in another order on a GPU.
  EXPECT_NEAR(run.on_device->last_step().grad_norm, run.host->last_step().grad_norm,
              1e-6 * run.host->last_step().grad_norm);
#else
  EXPECT_EQ(run.on_device->last_step().grad_norm, run.host->last_step().grad_norm);
#endif
  std::vector<float> downloaded(kSize);
  ASSERT_TRUE(
      ops->Download(downloaded.data(), run.device_params.data(), kSize * sizeof(float)).ok());
  ASSERT_TRUE(SameBits(downloaded, run.params));
  ASSERT_TRUE(SameBits(run.on_device->first_moment(), run.host->first_moment()));
  ASSERT_TRUE(SameBits(run.on_device->residual(), run.host->residual()));
  ASSERT_EQ(run.on_device->current_mask().indices, run.host->current_mask().indices);
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
  HostAndDeviceRun run;
  ASSERT_NO_FATAL_FAILURE(StartRun(ops.get(), &group, config,
                                   DeviceScapeStore::Create(ops.get(), Decays(),
                                                            optim::ScapeRule::kReference,
                                                            GetParam().placement, kStagingFloats),
                                   run));
  for (int step = 0; step < 6; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step + 1));
    ASSERT_NO_FATAL_FAILURE(StepBoth(ops.get(), run, step, 1e-3));
  }
  if (GetParam().placement == Placement::kDevice) {
    // A group of one: every sparse step's mask was the selection the store
    // held, its indices never on the host.
    EXPECT_GE(run.store->held_packs(), 3);
    EXPECT_EQ(run.store->staged_packs(), 0);
  } else {
    // Masks received after the first reached the device from the staging
    // the exchange's thread filled, uploaded there beside the step (and
    // gave the host's bits above).
    EXPECT_GE(run.store->staged_packs(), 2);
    EXPECT_EQ(run.store->packs_uploaded_beside(), run.store->staged_packs());
  }

  // One state format: the device form's checkpoint is the host form's.
  auto saved = run.on_device->SaveState();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, *run.host->SaveState());
  auto restored = optim::ScapeOptimizer::Create(
      &group, config, Decays(), kTensorBounds,
      *DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kReference, GetParam().placement,
                               kStagingFloats));
  ASSERT_TRUE(restored.ok());
  ASSERT_TRUE((*restored)->RestoreState(*saved).ok());
  EXPECT_TRUE(SameBits((*restored)->residual(), run.host->residual()));
  EXPECT_TRUE(SameBits((*restored)->first_moment(), run.host->first_moment()));
  // It goes on like the host's: the checkpoint's pending mask first, then
  // (a group of one on the device) masks held in the store again.
  run.on_device = *std::move(restored);
  for (int step = 6; step < 9; ++step) {
    SCOPED_TRACE(absl::StrCat("restored, step ", step + 1));
    ASSERT_NO_FATAL_FAILURE(StepBoth(ops.get(), run, step, 1e-3));
  }
  EXPECT_EQ(run.on_device->last_sync(), run.host->last_sync());
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
// What offloading is for: a device that holds m (and the catch-up rule's
// v̄), the values and two small staging chunks but not the residual too.
TEST_F(DeviceScapeStoreTest, OffloadedResidualsLeaveTheirBytesOffTheDevice) {
  // m, values (and v̄): 24576 bytes each in the allocator's size classes;
  // the decay bytes 6144; two staging chunks of 256 floats, 1024 each:
  // 57344 in all (81920 with v̄), where on-device residuals need 79872
  // (104448).
  struct Case {
    optim::ScapeRule rule;
    size_t capacity;
  };
  for (const Case& c : {Case{optim::ScapeRule::kReference, 65536},
                        Case{optim::ScapeRule::kCatchUp, 90112}}) {
    SCOPED_TRACE(optim::ScapeRuleName(c.rule));
    auto full = model::NewDeviceCopiesForTest(c.capacity);
    auto on_device = DeviceScapeStore::Create(full.get(), Decays(), c.rule, Placement::kDevice);
    EXPECT_EQ(on_device.status().code(), absl::StatusCode::kResourceExhausted)
        << on_device.status();
    auto ops = model::NewDeviceCopiesForTest(c.capacity);
    auto offloaded = DeviceScapeStore::Create(ops.get(), Decays(), c.rule, Placement::kPinnedHost, 256);
    EXPECT_TRUE(offloaded.ok()) << offloaded.status();
    EXPECT_EQ(
        DeviceScapeStore::Create(ops.get(), Decays(), c.rule, Placement::kPinnedHost, 0).status().code(),
        absl::StatusCode::kInvalidArgument);
  }
}
#endif

struct CatchUpCase {
  optim::MaskStatistic statistic;
  bool per_tensor_masks;
  double catch_up_exponent;
  const char* name;
  Placement placement = Placement::kDevice;
};
void PrintTo(const CatchUpCase& c, std::ostream* os) { *os << c.name; }

class DeviceScapeStoreCatchUpTest : public DeviceScapeStoreTest,
                                    public ::testing::WithParamInterface<CatchUpCase> {};

// SCAPE's default rule: a dense first step, sparse steps whose coordinates
// wait several steps (windows K > 1, the catch-up powers from the tables),
// a dense refresh, a residual sync and a changing learning rate; the masks
// ranked on the device by the statistic over the rank's range or per
// tensor (an offloaded residual: ranked on the host, staged through chunks
// smaller than a tensor). Every bit of θ, m, e, v̄ and every mask agrees
// with the host optimizer's, and so does the checkpoint.
TEST_P(DeviceScapeStoreCatchUpTest, CatchUpRuleMatchesTheHostOptimizerBitwise) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  const CatchUpCase& c = GetParam();
  optim::ScapeConfig config;
  ASSERT_EQ(config.rule, optim::ScapeRule::kCatchUp);
  config.density = 0.05;
  config.dense_refresh_interval = 7;
  config.residual_sync_period = 5;
  config.statistic = c.statistic;
  config.per_tensor_masks = c.per_tensor_masks;
  config.catch_up_exponent = c.catch_up_exponent;
  config.adams.weight_decay = 0.1;
  SingleProcessGroup group;
  HostAndDeviceRun run;
  ASSERT_NO_FATAL_FAILURE(StartRun(
      ops.get(), &group, config,
      DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kCatchUp, c.placement,
                               kStagingFloats),
      run));
  int64_t longest_window = 0;
  for (int step = 0; step < 12; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step + 1));
    const std::vector<int64_t> synced_before = run.host->last_sync();
    ASSERT_NO_FATAL_FAILURE(StepBoth(ops.get(), run, step, 1e-3 * (1.0 - 0.05 * step)));
    for (int64_t j : run.host->current_mask().indices) {
      longest_window = std::max(longest_window, step - synced_before[j]);
    }
    ASSERT_TRUE(SameBits(run.on_device->normalizer(), run.host->normalizer()));
    ASSERT_EQ(run.on_device->last_sync(), run.host->last_sync());
  }
  // The run exercised catch-up over several steps, not only K = 1.
  EXPECT_GE(longest_window, 3);
  if (c.placement == Placement::kDevice) {
    // The selections stayed on the device as the masks (a group of one).
    EXPECT_GE(run.store->held_packs(), 4);
    EXPECT_EQ(run.store->staged_packs(), 0);
  } else {
    // Masks and windows after the first came from the exchange's staging
    // (the masks uploaded beside the step).
    EXPECT_GE(run.store->staged_packs(), 4);
    EXPECT_EQ(run.store->packs_uploaded_beside(), run.store->staged_packs());
  }

  auto saved = run.on_device->SaveState();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, *run.host->SaveState());
  auto restored = optim::ScapeOptimizer::Create(
      &group, config, Decays(), kTensorBounds,
      *DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kCatchUp, c.placement,
                                kStagingFloats));
  ASSERT_TRUE(restored.ok());
  ASSERT_TRUE((*restored)->RestoreState(*saved).ok());
  EXPECT_TRUE(SameBits((*restored)->normalizer(), run.host->normalizer()));
  EXPECT_TRUE(SameBits((*restored)->residual(), run.host->residual()));
  EXPECT_TRUE(SameBits((*restored)->first_moment(), run.host->first_moment()));
  // It goes on like the host's, ages and windows included: the
  // checkpoint's pending mask first, then held masks again.
  run.on_device = *std::move(restored);
  for (int step = 12; step < 16; ++step) {
    SCOPED_TRACE(absl::StrCat("restored, step ", step + 1));
    ASSERT_NO_FATAL_FAILURE(StepBoth(ops.get(), run, step, 1e-3 * (1.0 - 0.05 * step)));
    ASSERT_TRUE(SameBits(run.on_device->normalizer(), run.host->normalizer()));
    ASSERT_EQ(run.on_device->last_sync(), run.host->last_sync());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configurations, DeviceScapeStoreCatchUpTest,
    ::testing::Values(
        CatchUpCase{optim::MaskStatistic::kMomentumPlusScaledResidual, false, 0.65,
                    "DefaultConfiguration"},
        CatchUpCase{optim::MaskStatistic::kNormalizedResidual, true, 0.65, "PerTensorNormalized"},
        CatchUpCase{optim::MaskStatistic::kResidual, false, 1.0, "FullCatchUpByResidual"},
        CatchUpCase{optim::MaskStatistic::kMomentumPlusScaledResidual, false, 0.65,
                    "DefaultConfigurationOffloaded", Placement::kPinnedHost},
        CatchUpCase{optim::MaskStatistic::kNormalizedResidual, true, 0.65,
                    "PerTensorNormalizedOffloaded", Placement::kPinnedHost}),
    [](const ::testing::TestParamInfo<CatchUpCase>& info) { return std::string(info.param.name); });

TEST_F(DeviceScapeStoreTest, AStoreRunsTheRuleItWasMadeFor) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  SingleProcessGroup group;
  optim::ScapeConfig config;
  // A reference-rule store cannot run the catch-up rule: its first step
  // says so.
  config.rule = optim::ScapeRule::kCatchUp;
  auto mismatched = optim::ScapeOptimizer::Create(
      &group, config, Decays(), kTensorBounds,
      *DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kReference));
  ASSERT_TRUE(mismatched.ok()) << mismatched.status();
  auto params = model::AllocateZeroed(*ops, kSize * sizeof(float));
  auto grads = model::AllocateZeroed(*ops, kSize * sizeof(float));
  ASSERT_TRUE(params.ok() && grads.ok());
  const absl::Status step =
      (*mismatched)->Step(params->as<float>(), grads->as<float>(), kSize, 1e-3);
  EXPECT_EQ(step.code(), absl::StatusCode::kFailedPrecondition) << step;
  EXPECT_NE(step.message().find("reference rule"), std::string::npos) << step;

  optim::OptimizerOptions options;
  options.name = "scape";
  EXPECT_TRUE(DeviceScapeStore::Supports(options));  // the default rule: catch-up
  options.scape.rule = optim::ScapeRule::kReference;
  EXPECT_TRUE(DeviceScapeStore::Supports(options));
  options.name = "adams";
  EXPECT_FALSE(DeviceScapeStore::Supports(options));
}

// The held selections directly: packed in the order held, at most two
// waiting, each the set SelectByStatistic returns (read back through
// ReadMask), the last Pack's mask readable too; a Pack with none held, a
// third hold and a dense held Pack are refused; Write drops what is held.
TEST_F(DeviceScapeStoreTest, HeldSelectionsArePackedInTheOrderHeld) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  auto created = DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kReference);
  ASSERT_TRUE(created.ok()) << created.status();
  DeviceScapeStore& store = **created;
  ASSERT_TRUE(store.holds_masks());
  const std::vector<float> residual = Random(7, 1.0f);
  std::vector<float> m(kSize, 0.0f), vbar;
  std::vector<int64_t> last_sync(kSize, -1);
  ASSERT_TRUE(store.Write(m, residual, vbar, last_sync).ok());
  const kernels::host_device::MaskStatisticScalars scalars{0.9f, 1e-8f, 1.0f};
  const optim::MaskStatistic by = optim::MaskStatistic::kResidual;
  const DeviceScapeStore::TopKSegment first[] = {{0, 2000, 50}, {2000, 100, 100}};
  const DeviceScapeStore::TopKSegment second[] = {{2100, 3900, 70}};
  using MaskSource = optim::ScapeStateStore::MaskSource;

  EXPECT_EQ(store.Pack({}, false, MaskSource::kHeld).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto expected_first = store.SelectByStatistic(first, by, scalars);
  auto expected_second = store.SelectByStatistic(second, by, scalars);
  ASSERT_TRUE(expected_first.ok() && expected_second.ok());
  ASSERT_EQ(expected_first->size(), 150u);
  EXPECT_EQ(*store.HoldSelection(first, by, scalars), 150);
  EXPECT_EQ(*store.HoldSelection(second, by, scalars), 70);
  EXPECT_EQ(store.HoldSelection(first, by, scalars).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*store.ReadMask(/*held=*/true), *expected_first);
  EXPECT_EQ(store.Pack({}, true, MaskSource::kHeld).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // The first held mask packs e there (and zeroes it); the second waits.
  auto packed = store.Pack({}, false, MaskSource::kHeld);
  ASSERT_TRUE(packed.ok()) << packed.status();
  std::vector<float> values(150);
  ASSERT_TRUE(ops->Download(values.data(), *packed, values.size() * sizeof(float)).ok());
  for (size_t p = 0; p < values.size(); ++p) {
    ASSERT_EQ(values[p], residual[(*expected_first)[p]]) << p;
  }
  EXPECT_EQ(*store.ReadMask(/*held=*/false), *expected_first);
  EXPECT_EQ(*store.ReadMask(/*held=*/true), *expected_second);
  EXPECT_EQ(store.held_packs(), 1);

  // Replacing the state drops the waiting mask.
  ASSERT_TRUE(store.Write(m, residual, vbar, last_sync).ok());
  EXPECT_EQ(store.ReadMask(/*held=*/true).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Pack({}, false, MaskSource::kHeld).status().code(),
            absl::StatusCode::kFailedPrecondition);

  // An offloaded residual's store holds nothing.
  auto offloaded = DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kCatchUp,
                                            Placement::kPinnedHost, kStagingFloats);
  ASSERT_TRUE(offloaded.ok());
  EXPECT_FALSE((*offloaded)->holds_masks());
  EXPECT_EQ((*offloaded)->HoldSelection(second, by, scalars).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A staged mask (what the exchange's thread stages for a group of more than
// one) goes up to the device beside the step: the Pack that takes it
// uploads nothing, and packs the residual at exactly those indices, slot
// after slot; a mask staged but not taken, and one larger than the staging,
// leave the next Packs right.
TEST_F(DeviceScapeStoreTest, StagedMasksReachTheDeviceBesideTheStep) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  auto created = DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kReference);
  ASSERT_TRUE(created.ok()) << created.status();
  DeviceScapeStore& store = **created;
  std::vector<float> residual = Random(11, 1.0f);
  const std::vector<float> m(kSize, 0.0f), vbar;
  const std::vector<int64_t> last_sync(kSize, -1);
  ASSERT_TRUE(store.Write(m, residual, vbar, last_sync).ok());
  using MaskSource = optim::ScapeStateStore::MaskSource;
  // Every `stride`-th coordinate from `first`: 100 ascending indices.
  auto mask_of = [](int64_t first, int64_t stride) {
    std::vector<int64_t> mask(100);
    for (int64_t p = 0; p < 100; ++p) mask[p] = first + p * stride;
    return mask;
  };
  // Packs `mask` from `source` and checks the values are e there (then zeroed).
  auto pack_and_check = [&](const std::vector<int64_t>& mask, MaskSource source) {
    auto packed = store.Pack(mask, false, source);
    ASSERT_TRUE(packed.ok()) << packed.status();
    std::vector<float> values(mask.size());
    ASSERT_TRUE(ops->Download(values.data(), *packed, values.size() * sizeof(float)).ok());
    for (size_t p = 0; p < mask.size(); ++p) {
      ASSERT_EQ(values[p], residual[mask[p]]) << "entry " << p;
      residual[mask[p]] = 0.0f;
    }
  };

  // Before any Pack there is no staging: nothing is staged.
  EXPECT_FALSE(store.StageMask(mask_of(0, 7), {}));
  ASSERT_NO_FATAL_FAILURE(pack_and_check(mask_of(0, 7), MaskSource::kHost));
  for (int64_t round = 1; round <= 4; ++round) {
    const std::vector<int64_t> mask = mask_of(round, 13 + round);
    ASSERT_TRUE(store.StageMask(mask, {}));
    ASSERT_NO_FATAL_FAILURE(pack_and_check(mask, MaskSource::kReceived));
    EXPECT_EQ(store.packs_uploaded_beside(), round);
  }
  // Staged but replaced by a host mask: the host mask is packed, and the
  // next staged one is still right.
  ASSERT_TRUE(store.StageMask(mask_of(5, 11), {}));
  ASSERT_NO_FATAL_FAILURE(pack_and_check(mask_of(6, 19), MaskSource::kHost));
  ASSERT_TRUE(store.StageMask(mask_of(9, 23), {}));
  ASSERT_NO_FATAL_FAILURE(pack_and_check(mask_of(9, 23), MaskSource::kReceived));
  EXPECT_EQ(store.packs_uploaded_beside(), 5);
  EXPECT_EQ(store.staged_packs(), 5);
  // Larger than the staging holds (a quarter more than the last mask).
  std::vector<int64_t> large(200);
  for (int64_t p = 0; p < 200; ++p) large[p] = 3 * p;
  EXPECT_FALSE(store.StageMask(large, {}));
  ASSERT_NO_FATAL_FAILURE(pack_and_check(large, MaskSource::kHost));
  // That Pack grew the staging: a mask of 200 now goes up beside the step.
  std::vector<int64_t> shifted(200);
  for (int64_t p = 0; p < 200; ++p) shifted[p] = 3 * p + 1;
  ASSERT_TRUE(store.StageMask(shifted, {}));
  ASSERT_NO_FATAL_FAILURE(pack_and_check(shifted, MaskSource::kReceived));
  EXPECT_EQ(store.packs_uploaded_beside(), 6);
}

// The ages are int32 on the device: a checkpoint's age past that range, or
// a step past it, is refused naming the problem (not wrapped).
TEST_F(DeviceScapeStoreTest, AgesPastTheirInt32RangeAreRefused) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  auto created = DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kCatchUp);
  ASSERT_TRUE(created.ok()) << created.status();
  DeviceScapeStore& store = **created;
  std::vector<float> zeros(kSize, 0.0f);
  std::vector<int64_t> last_sync(kSize, -1);
  last_sync[1234] = int64_t{1} << 31;
  absl::Status refused = store.Write(zeros, zeros, zeros, last_sync);
  EXPECT_EQ(refused.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(refused.message().find("coordinate 1234"), std::string::npos) << refused;
  last_sync[1234] = -2;
  EXPECT_EQ(store.Write(zeros, zeros, zeros, last_sync).code(), absl::StatusCode::kOutOfRange);
  last_sync[1234] = 7;
  ASSERT_TRUE(store.Write(zeros, zeros, zeros, last_sync).ok());
  std::vector<float> m, e, vbar;
  std::vector<int64_t> read;
  ASSERT_TRUE(store.Read(m, e, vbar).ok());
  ASSERT_TRUE(store.ReadAges(read).ok());
  EXPECT_EQ(read, last_sync);

  // A dense pack, then an update at a step whose stamp would not fit.
  ASSERT_TRUE(store.Pack({}, true, optim::ScapeStateStore::MaskSource::kHost).ok());
  const optim::AdamConfig adams;
  const optim::CatchUpPowerTables powers =
      optim::CatchUpPowerTablesOf(adams.beta1, 0.65, optim::kCatchUpCachedWindows);
  auto device_params = model::AllocateZeroed(*ops, kSize * sizeof(float));
  ASSERT_TRUE(device_params.ok());
  const absl::Status late = store.CatchUpApply(
      device_params->as<float>(), std::numeric_limits<int32_t>::max(),
      optim::ScapeCatchUpScalarsAt(adams, 1e-3, 0.95, false), powers);
  EXPECT_EQ(late.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(late.message().find("int32"), std::string::npos) << late;
}

// A device store's state is not mirrored on the host: the optimizer holds
// no per-coordinate host memory through training steps and a checkpoint
// restore (the ages too live on the device), only once a host copy is
// asked for; the host store holds its whole state.
TEST_F(DeviceScapeStoreTest, TheOptimizerKeepsNoHostCopyOfADeviceState) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  SingleProcessGroup group;
  optim::ScapeConfig config;
  config.density = 0.05;
  auto on_device = optim::ScapeOptimizer::Create(
      &group, config, Decays(), kTensorBounds,
      *DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kCatchUp));
  auto on_host = optim::ScapeOptimizer::Create(&group, config, Decays(), kTensorBounds);
  ASSERT_TRUE(on_device.ok() && on_host.ok());
  EXPECT_GE((*on_host)->host_state_bytes(), kSize * (3 * sizeof(float) + sizeof(int64_t)));
  auto params = model::AllocateZeroed(*ops, kSize * sizeof(float));
  auto grads = ops->Allocate(kSize * sizeof(float));
  ASSERT_TRUE(params.ok() && grads.ok());
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> g = Random(200 + step, 0.05f);
    ASSERT_TRUE(ops->Upload(grads->data(), g.data(), kSize * sizeof(float)).ok());
    ASSERT_TRUE((*on_device)->Step(params->as<float>(), grads->as<float>(), kSize, 1e-3).ok());
  }
  EXPECT_EQ((*on_device)->host_state_bytes(), 0);
  auto saved = (*on_device)->SaveState();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ((*on_device)->host_state_bytes(), 0);  // read for the checkpoint, then freed
  auto restored = optim::ScapeOptimizer::Create(
      &group, config, Decays(), kTensorBounds,
      *DeviceScapeStore::Create(ops.get(), Decays(), optim::ScapeRule::kCatchUp));
  ASSERT_TRUE(restored.ok());
  ASSERT_TRUE((*restored)->RestoreState(*saved).ok());
  EXPECT_EQ((*restored)->host_state_bytes(), 0);
  ASSERT_TRUE((*restored)->Step(params->as<float>(), grads->as<float>(), kSize, 1e-3).ok());
  EXPECT_EQ((*restored)->host_state_bytes(), 0);
  EXPECT_EQ((*restored)->first_moment().size(), static_cast<size_t>(kSize));
}

}  // namespace
}  // namespace corescape::train
