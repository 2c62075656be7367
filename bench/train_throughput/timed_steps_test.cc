// The timed step with each optimizer placement, on the CPU kernels with a
// GPU's data flow (device copies), as the GPU benchmark runs it on cuda:0.
#include "bench/train_throughput/timed_steps.h"

#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/model/model_ops.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/optim/scape_optimizer.h"

namespace corescape::bench {
namespace {

TEST(TimedStepsTest, EveryPlacementAndSparseOverheadOnADeviceBackend) {
  auto config = model::PresetConfig("tiny");
  ASSERT_TRUE(config.ok());
  std::shared_ptr<model::ModelOps> ops =
      model::NewCpuModelOps(model::CpuParameterMode::kDeviceCopies, nullptr);
  auto model = model::Transformer::Create(*config, ops);
  ASSERT_TRUE(model.ok()) << model.status();
  model->InitializeWeights(1);
  const model::ModelBatch batch = PackedRandomBatch(*config, 2, 64, 2);

  auto device = TimeTrainingSteps(*model, ops->local_attention(), batch, 1, 2,
                                  OptimizerPlacement::kModelDevice);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_GT(device->step_seconds, 0);
  EXPECT_TRUE(std::isfinite(device->last_loss));
  EXPECT_EQ(device->sparse_overhead_seconds, 0);  // AdamW has none
  EXPECT_FALSE(model->host_parameters_current());

  // The host optimizer after the device one starts from its parameters.
  optim::OptimizerOptions scape;
  scape.name = optim::OptimizerName(optim::OptimizerKind::kScape);
  scape.scape.density = 0.1;
  auto sparse = TimeTrainingSteps(*model, ops->local_attention(), batch, 1, 3,
                                  OptimizerPlacement::kHost, scape);
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_GT(sparse->sparse_overhead_seconds, 0);
  EXPECT_LT(sparse->sparse_overhead_seconds, sparse->step_seconds);
  EXPECT_LT(sparse->last_loss, device->last_loss + 1.0);

  // The reconstructed rule has no device form; the default catch-up rule
  // and the reference rule have, each with its residual on the device or
  // offloaded.
  scape.scape.rule = optim::ScapeRule::kReconstructed;
  EXPECT_EQ(TimeTrainingSteps(*model, ops->local_attention(), batch, 0, 1,
                              OptimizerPlacement::kModelDevice, scape)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
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
    EXPECT_GT(timed->sparse_overhead_seconds, 0);
    EXPECT_LT(timed->sparse_overhead_seconds, timed->step_seconds);
    EXPECT_TRUE(std::isfinite(timed->last_loss));
    EXPECT_FALSE(model->host_parameters_current());
  }
}

}  // namespace
}  // namespace corescape::bench
