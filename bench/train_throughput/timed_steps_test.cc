// The timed step with each optimizer placement, on the CPU kernels with a
// GPU's data flow (device copies), as the GPU benchmark runs it on cuda:0.
#include "bench/train_throughput/timed_steps.h"

#include <cmath>
#include <map>
#include <string>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::bench {
namespace {

// `tiny` on the CPU kernels with a GPU's data flow, and a batch for it.
class TimedStepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto config = model::PresetConfig("tiny");
    ASSERT_TRUE(config.ok());
    config_ = *config;
    ops = model::NewCpuModelOps(model::CpuParameterMode::kDeviceCopies, nullptr);
    auto created = model::Transformer::Create(config_, ops);
    ASSERT_TRUE(created.ok()) << created.status();
    model_ = std::make_unique<model::Transformer>(*std::move(created));
    model_->InitializeWeights(1);
    batch = PackedRandomBatch(config_, 2, 64, 2);
  }

  model::ModelConfig config_;
  std::shared_ptr<model::ModelOps> ops;
  std::unique_ptr<model::Transformer> model_;
  model::ModelBatch batch;
};

TEST_F(TimedStepsTest, EveryPlacementAndSparseOverheadOnADeviceBackend) {
  model::Transformer* model = model_.get();

  auto device = TimeTrainingSteps(*model, ops->local_attention(), batch, 1, 2,
                                  OptimizerPlacement::kModelDevice);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_GT(device->step_seconds, 0);
  EXPECT_TRUE(std::isfinite(device->last_loss));
  EXPECT_EQ(device->sparse_overhead_seconds(), 0);  // AdamW has none
  EXPECT_FALSE(model->host_parameters_current());

  // The host optimizer after the device one starts from its parameters.
  optim::OptimizerOptions scape;
  scape.name = optim::OptimizerName(optim::OptimizerKind::kScape);
  scape.scape.density = 0.1;
  auto sparse = TimeTrainingSteps(*model, ops->local_attention(), batch, 1, 3,
                                  OptimizerPlacement::kHost, scape);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_GT(sparse->sparse_overhead_seconds(), 0);
  EXPECT_LT(sparse->sparse_overhead_seconds(), sparse->step_seconds);
  EXPECT_NEAR(sparse->sparse_overhead_seconds(),
              sparse->phases.select + sparse->phases.encode + sparse->phases.pack, 1e-9);
  EXPECT_GT(sparse->phases.pack, 0);
  EXPECT_LT(sparse->last_loss, device->last_loss + 1.0);

  // Both rules have a device form, each with its residual on the device or
  // offloaded.
  const std::pair<optim::ScapeRule, bool> device_forms[] = {
      {optim::ScapeRule::kCatchUp, false},
      {optim::ScapeRule::kCatchUp, true},
      {optim::ScapeRule::kReference, false},
      {optim::ScapeRule::kReference, true}};
  for (const auto& [rule, offload] : device_forms) {
    SCOPED_TRACE(
        absl::StrCat(optim::ScapeRuleName(rule), offload ? " offloaded" : " on the device"));
    scape.scape.rule = rule;
    scape.scape.offload_residuals = offload;
    auto timed = TimeTrainingSteps(*model, ops->local_attention(), batch, 1, 3,
                                   OptimizerPlacement::kModelDevice, scape);
    ASSERT_TRUE(timed.ok()) << timed.status();
    EXPECT_GT(timed->sparse_overhead_seconds(), 0);
    EXPECT_LT(timed->sparse_overhead_seconds(), timed->step_seconds);
    EXPECT_TRUE(std::isfinite(timed->last_loss));
    EXPECT_FALSE(model->host_parameters_current());
  }
  // Raw-gradient top-k AdamW has a device form too.
  optim::OptimizerOptions topk;
  topk.name = optim::OptimizerName(optim::OptimizerKind::kTopKAdamW);
  topk.scape.density = 0.1;
  auto timed = TimeTrainingSteps(*model, ops->local_attention(), batch, 1, 3,
                                 OptimizerPlacement::kModelDevice, topk);
  ASSERT_TRUE(timed.ok()) << timed.status();
  EXPECT_GT(timed->phases.select, 0);
  EXPECT_GT(timed->phases.pack, 0);
  EXPECT_LT(timed->sparse_overhead_seconds(), timed->step_seconds);
  EXPECT_TRUE(std::isfinite(timed->last_loss));
  EXPECT_FALSE(model->host_parameters_current());
}

// The op profile names the step's kernels and the attention calls, each
// counted as often as the step issues it, and adds up to less than the step.
TEST_F(TimedStepsTest, OpProfileCoversTheStep) {
  model::Transformer* model = model_.get();
  const int steps = 2;
  auto timed = TimeTrainingSteps(*model, ops->local_attention(), batch, 1, steps,
                                 OptimizerPlacement::kModelDevice, PlainAdamW(),
                                 /*profile_ops=*/true);
  ASSERT_TRUE(timed.ok()) << timed.status();
  std::map<std::string, device::StreamProfiler::Total> by_name;
  double sum_ms = 0;
  for (const device::StreamProfiler::Total& total : timed->op_profile) {
    by_name[total.name] = total;
    sum_ms += total.milliseconds;
  }
  for (const char* name : {"LinearForward", "LinearBackward", "RmsNormForward", "CrossEntropy",
                           "CoreAttentionForward", "CoreAttentionBackward", "AdamWUpdate"}) {
    EXPECT_TRUE(by_name.count(name)) << name;
  }
  EXPECT_EQ(by_name["CoreAttentionForward"].spans, config_.n_layers * steps);
  EXPECT_EQ(by_name["CoreAttentionBackward"].spans, config_.n_layers * steps);
  // The LM head and its loss run in chunks of rows: the same count each step.
  EXPECT_GE(by_name["CrossEntropy"].spans, steps);
  EXPECT_EQ(by_name["CrossEntropy"].spans % steps, 0);
  EXPECT_GT(sum_ms, 0);
  EXPECT_LT(sum_ms, timed->step_seconds * 1e3);
  for (size_t i = 1; i < timed->op_profile.size(); ++i) {
    EXPECT_GE(timed->op_profile[i - 1].milliseconds, timed->op_profile[i].milliseconds);
  }
  // Profiling stopped with the run.
  EXPECT_EQ(ops->op_profile().active(), nullptr);
}

}  // namespace
}  // namespace corescape::bench
