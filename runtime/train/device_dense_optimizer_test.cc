// DeviceDenseOptimizer and DeviceTopKAdamW against the host optimizers. The
// same source runs on the CPU device-copies backend (in CI: its kernels run
// at once, and in the _deferred twin queued as a GPU's are) and, built as
// device_dense_optimizer_gpu_test, on cuda:0.
#include "runtime/train/device_dense_optimizer.h"

#include "runtime/train/device_topk_adamw.h"

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/device/device.h"
#include "runtime/device/device_runtime.h"
#include "runtime/model/cpu_execution_for_test.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/in_process_rank_group.h"
#include "runtime/optim/optimizer_registry.h"
#include "runtime/optim/sparse_mask.h"
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
  return model::NewDeviceCopiesForTest(capacity_bytes);
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
    if (bitwise) {
      EXPECT_EQ(*saved, *(*host)->SaveState());
    }
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

optim::OptimizerOptions TopKOptions() {
  optim::OptimizerOptions options;
  options.name = "topk-adamw";
  options.scape.density = 0.03;
  return options;
}

// topk-adamw on the device against its host form: two dense warm-up steps,
// then sparse ones; parameters, moments, the union and the saved state
// agree bit for bit, and the state crosses between the forms.
TEST_F(DeviceDenseOptimizerTest, TopKAdamWMatchesTheHostForm) {
  std::unique_ptr<model::ModelOps> ops = Backend();
  ASSERT_NE(ops, nullptr);
  SingleProcessGroup group;
  optim::OptimizerOptions options = TopKOptions();
  options.scape.dense_warmup_steps = 2;
  auto host = optim::CreateOptimizer(options, &group, Decays());
  ASSERT_TRUE(host.ok()) << host.status();
  auto on_device = DeviceTopKAdamW::Create(options, &group, ops.get(), Decays());
  ASSERT_TRUE(on_device.ok()) << on_device.status();
  EXPECT_EQ((*on_device)->name(), (*host)->name());
  auto* host_topk = dynamic_cast<optim::TopKGradientAdamW*>(host->get());
  ASSERT_NE(host_topk, nullptr);

  std::vector<float> params = Random(1, 0.02f);
  DeviceBuffers device = Upload(*ops, params);
  const int64_t k = optim::MaskCountForRange(kSize, options.scape.density);
  for (int step = 0; step < 6; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    std::vector<float> grads = Random(100 + step, 0.05f);
    ASSERT_TRUE(ops->Upload(device.grads.data(), grads.data(), kSize * sizeof(float)).ok());
    const double lr = 1e-3 * (step + 1);
    ASSERT_TRUE((*host)->Step(params.data(), grads.data(), kSize, lr).ok());
    absl::Status s =
        (*on_device)->Step(device.params.as<float>(), device.grads.as<float>(), kSize, lr);
    ASSERT_TRUE(s.ok()) << s;
    const optim::OptimizerStepStats& got = (*on_device)->last_step();
    EXPECT_EQ(got.step, step + 1);
    EXPECT_EQ(got.dense, step < 2);
    EXPECT_EQ(got.synced_values, step < 2 ? kSize : k);
    EXPECT_EQ(got.mask_entries, (*host)->last_step().mask_entries);
    if (step >= 2) {
      EXPECT_EQ((*on_device)->last_union_size(), host_topk->last_union_size());
    }
    ExpectClose(Download(*ops, device.params), params, /*bitwise=*/true);
  }
  ExpectClose((*on_device)->first_moment(), (*host)->first_moment(), true);
  auto saved = (*on_device)->SaveState();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(*saved, *(*host)->SaveState()) << "moments and residual, the host's format";

  // The host's state restores into a device form, which then steps like
  // the host one (the residual came along).
  auto second = DeviceTopKAdamW::Create(options, &group, ops.get(), Decays());
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*second)->RestoreState(*(*host)->SaveState()).ok());
  EXPECT_EQ((*second)->step_count(), 6);
  std::vector<float> grads = Random(999, 0.05f);
  ASSERT_TRUE(ops->Upload(device.grads.data(), grads.data(), kSize * sizeof(float)).ok());
  ASSERT_TRUE((*host)->Step(params.data(), grads.data(), kSize, 1e-3).ok());
  ASSERT_TRUE(
      (*second)->Step(device.params.as<float>(), device.grads.as<float>(), kSize, 1e-3).ok());
  ExpectClose(Download(*ops, device.params), params, true);
}

// Three ranks, each with its own backend, against three host forms: the
// exchange gives every rank the same sums, so all six runs agree bit for
// bit, and the union is larger than one rank's picks (fill-in).
TEST_F(DeviceDenseOptimizerTest, TopKAdamWRanksMatchTheHostForm) {
  constexpr int kWorld = 3;
  constexpr int kSteps = 4;
  const optim::OptimizerOptions options = TopKOptions();
  // params[form][rank] after each step; form 0 the host's, 1 the device's.
  std::vector<float> params[2][kWorld][kSteps];
  int64_t unions[2][kWorld][kSteps] = {};
  for (int form = 0; form < 2; ++form) {
    optim::InProcessHub hub(kWorld);
    std::vector<std::thread> ranks;
    std::vector<absl::Status> results(kWorld);
    for (int r = 0; r < kWorld; ++r) {
      ranks.emplace_back([&, form, r] {
        optim::InProcessRankGroup group(&hub, r);
        std::unique_ptr<model::ModelOps> ops = form == 1 ? Backend() : nullptr;
        absl::StatusOr<std::unique_ptr<optim::DataParallelOptimizer>> optimizer =
            form == 1 ? absl::StatusOr<std::unique_ptr<optim::DataParallelOptimizer>>(
                            DeviceTopKAdamW::Create(options, &group, ops.get(), Decays()))
                      : optim::CreateOptimizer(options, &group, Decays());
        if (!optimizer.ok()) {
          results[r] = optimizer.status();
          hub.Abort(results[r]);
          return;
        }
        std::vector<float> host_params = Random(1, 0.02f);
        DeviceBuffers device;
        if (form == 1) device = Upload(*ops, host_params);
        for (int step = 0; step < kSteps; ++step) {
          std::vector<float> grads = Random(100 + 10 * step + r, 0.05f);
          absl::Status s;
          if (form == 1) {
            s = ops->Upload(device.grads.data(), grads.data(), kSize * sizeof(float));
            if (s.ok()) {
              s = (*optimizer)->Step(device.params.as<float>(), device.grads.as<float>(), kSize,
                                     1e-3);
            }
            if (s.ok()) params[form][r][step] = Download(*ops, device.params);
          } else {
            s = (*optimizer)->Step(host_params.data(), grads.data(), kSize, 1e-3);
            params[form][r][step] = host_params;
          }
          if (!s.ok()) {
            results[r] = s;
            hub.Abort(s);
            return;
          }
          unions[form][r][step] = (*optimizer)->last_step().mask_entries;
        }
      });
    }
    for (std::thread& rank : ranks) rank.join();
    for (int r = 0; r < kWorld; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  }
  const int64_t k = optim::MaskCountForRange(kSize, options.scape.density);
  for (int step = 0; step < kSteps; ++step) {
    for (int r = 0; r < kWorld; ++r) {
      SCOPED_TRACE(absl::StrCat("step ", step, " rank ", r));
      ExpectClose(params[1][r][step], params[0][r][step], /*bitwise=*/true);
      ExpectClose(params[1][r][step], params[1][0][step], true);
      EXPECT_EQ(unions[1][r][step], unions[0][r][step]);
      EXPECT_GT(unions[1][r][step], k);
      EXPECT_LE(unions[1][r][step], kWorld * k);
    }
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

  optim::OptimizerOptions topk = TopKOptions();
  topk.scape.density = 0;
  auto no_density = DeviceTopKAdamW::Create(topk, &group, ops.get(), Decays());
  ASSERT_EQ(no_density.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_density.status().message().find("density"), std::string::npos);
  EXPECT_EQ(DeviceTopKAdamW::Create(options, &group, ops.get(), Decays()).status().code(),
            absl::StatusCode::kInvalidArgument) << "adams is not topk-adamw";
  auto topk_adamw = DeviceTopKAdamW::Create(TopKOptions(), &group, ops.get(), Decays());
  ASSERT_TRUE(topk_adamw.ok());
  EXPECT_EQ((*topk_adamw)
                ->Step(device.params.as<float>(), device.grads.as<float>(), kSize + 1, 1e-3)
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Its state carries a residual: a dense AdamW's is another optimizer's.
  EXPECT_EQ((*topk_adamw)->RestoreState(*(*adamw)->SaveState()).code(),
            absl::StatusCode::kFailedPrecondition);
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
