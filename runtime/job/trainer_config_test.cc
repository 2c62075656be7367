#include "runtime/job/trainer_config.h"

#include <fstream>
#include <map>
#include <string>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/job/job_spec.h"

namespace corescape::job {
namespace {

// A shard file that exists (validation checks the paths; its contents are
// the trainer's business).
std::string Shard(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << "x";
  return path;
}

v1::JobSpec Spec(const std::string& optimizer) {
  v1::JobSpec spec;
  spec.mutable_data()->add_train_shards(Shard("fortunes"));
  spec.set_steps(40);
  spec.mutable_optimizer()->set_name(optimizer);
  return spec;
}

// What a submitted spec trains with: resolved where it is accepted, then
// translated.
absl::StatusOr<train::TrainerConfig> SubmittedConfig(const v1::JobSpec& spec) {
  auto resolved = ResolveJobSpec(spec);
  if (!resolved.ok()) return resolved.status();
  return TrainerConfigFromSpec(*resolved);
}

// The scheduler's assignment of `spec`, resolved at submit.
v1::JobAssignment Assignment(const v1::JobSpec& spec) {
  v1::JobAssignment assignment;
  assignment.set_job_id("job-1");
  assignment.set_generation(3);
  assignment.set_world_size(2);
  auto resolved = ResolveJobSpec(spec);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  if (resolved.ok()) *assignment.mutable_spec() = resolved->spec();
  return assignment;
}

// A job submitted from flags, or from a file without grad_clip, trains
// clipped at the documented default; an explicit 0 trains unclipped.
TEST(TrainerConfigTest, GradClipDefaultsToOneAndZeroTurnsItOff) {
  auto config = SubmittedConfig(Spec("adamw"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->optimizer.grad_clip, 1.0);

  v1::JobSpec off = Spec("adamw");
  off.mutable_optimizer()->set_grad_clip(0);
  config = SubmittedConfig(off);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->optimizer.grad_clip, 0.0);
}

TEST(TrainerConfigTest, SpecFieldsReachTheTrainer) {
  v1::JobSpec spec = Spec("topk-adamw");
  spec.mutable_data()->add_validation_shards(Shard("val"));
  spec.mutable_data()->set_sequence_length(64);
  spec.mutable_data()->set_micro_batch_size(3);
  spec.mutable_data()->set_gradient_accumulation(2);
  spec.mutable_optimizer()->set_learning_rate(1e-3);
  spec.mutable_optimizer()->set_min_learning_rate(1e-4);
  spec.mutable_optimizer()->set_warmup_steps(5);
  spec.mutable_optimizer()->set_schedule("linear");
  spec.mutable_optimizer()->set_beta2(0.99);
  spec.mutable_optimizer()->set_weight_decay(0.05);
  spec.mutable_model()->set_n_layers(3);
  spec.set_seed(7);
  auto config = SubmittedConfig(spec);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->model.n_layers, 3);
  EXPECT_EQ(config->train_data, std::vector<std::string>{Shard("fortunes")});
  EXPECT_EQ(config->validation_data, std::vector<std::string>{Shard("val")});
  EXPECT_EQ(config->seq_len, 64);
  EXPECT_EQ(config->micro_batch, 3);
  EXPECT_EQ(config->grad_accum, 2);
  EXPECT_EQ(config->steps, 40);
  EXPECT_EQ(config->seed, 7u);
  EXPECT_EQ(config->optimizer.name, "topk-adamw");
  EXPECT_DOUBLE_EQ(config->optimizer.adam.beta1, 0.9);  // default
  EXPECT_DOUBLE_EQ(config->optimizer.adam.beta2, 0.99);
  EXPECT_DOUBLE_EQ(config->optimizer.adam.weight_decay, 0.05);
  EXPECT_DOUBLE_EQ(config->optimizer.scape.density, 0.1);  // default
  EXPECT_EQ(config->schedule.kind, optim::LrSchedule::Kind::kLinear);
  EXPECT_DOUBLE_EQ(config->schedule.peak_lr, 1e-3);
  EXPECT_DOUBLE_EQ(config->schedule.min_lr, 1e-4);
  EXPECT_EQ(config->schedule.warmup_steps, 5);
  EXPECT_EQ(config->schedule.total_steps, 40);
  EXPECT_FALSE(config->ping_pong);
}

// Every ModelSpec field but the preset overrides the preset in the model
// the trainer builds: one left out of ModelConfigFromSpec (or added to the
// proto without it) fails here. Values differ from the tiny preset's.
TEST(TrainerConfigTest, EveryModelOverrideReachesTheModel) {
  const std::map<std::string, nlohmann::json> overrides = {
      {"n_layers", 5},         {"d_model", 128},      {"n_heads", 8},
      {"n_kv_heads", 4},       {"d_ff", 300},         {"vocab_size", 300},
      {"max_seq_len", 512},    {"rope_theta", 500000.0}, {"norm_eps", 1e-6},
      {"tie_embeddings", true}};
  v1::JobSpec spec = Spec("adamw");
  spec.mutable_model()->set_preset("tiny");
  const google::protobuf::Descriptor* model = v1::ModelSpec::descriptor();
  const google::protobuf::Reflection* reflection = spec.model().GetReflection();
  for (int i = 0; i < model->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = model->field(i);
    if (field->name() == "preset") continue;
    auto value = overrides.find(field->name());
    ASSERT_NE(value, overrides.end()) << "model." << field->name() << " has no case here";
    v1::ModelSpec& m = *spec.mutable_model();
    switch (field->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_INT32:
        reflection->SetInt32(&m, field, value->second.get<int32_t>());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE:
        reflection->SetDouble(&m, field, value->second.get<double>());
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_BOOL:
        reflection->SetBool(&m, field, value->second.get<bool>());
        break;
      default:
        FAIL() << "model." << field->name() << ": a type this test cannot set";
    }
  }
  auto config = SubmittedConfig(spec);
  ASSERT_TRUE(config.ok()) << config.status();
  const nlohmann::json trained = nlohmann::json::parse(DescribeTrainerConfig(*config))["model"];
  for (const auto& [name, value] : overrides) {
    EXPECT_EQ(trained[name], value) << "model." << name << " did not reach the model";
  }
}

TEST(TrainerConfigTest, ScapeAssignmentNeedsTheSchedulersMaskEpoch) {
  v1::JobSpec spec = Spec("scape");
  spec.mutable_optimizer()->mutable_scape()->set_density(0.05);
  spec.mutable_optimizer()->mutable_scape()->set_mask_statistic("residual");
  v1::JobAssignment assignment = Assignment(spec);
  auto refused = TrainerConfigForAssignment(assignment, 2);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("no valid mask epoch"), std::string::npos);

  v1::MaskEpochCommand& epoch = *assignment.mutable_mask_epoch();
  epoch.set_epoch(5);
  epoch.set_generation(3);
  epoch.set_world_size(2);
  for (int64_t bound : {0, 10, 20}) epoch.add_partition_bounds(bound);
  epoch.set_residual_sync_period(25);
  epoch.add_forced_dense_steps(50);
  assignment.set_gradient_accumulation(4);
  auto config = TrainerConfigForAssignment(assignment, 2);
  ASSERT_TRUE(config.ok()) << config.status();
  const optim::ScapeConfig& scape = config->optimizer.scape;
  EXPECT_EQ(scape.mask_epoch, 5u);
  EXPECT_EQ(scape.partition_bounds, (std::vector<int64_t>{0, 10, 20}));
  EXPECT_EQ(scape.residual_sync_period, 25);
  EXPECT_EQ(scape.forced_dense_steps, std::vector<int64_t>{50});
  EXPECT_DOUBLE_EQ(scape.density, 0.05);
  EXPECT_EQ(scape.statistic, optim::MaskStatistic::kResidual);
  EXPECT_EQ(scape.WarmupSteps(), 1);      // at least one dense step
  EXPECT_EQ(config->grad_accum, 4);        // the assignment's (elastic)
  EXPECT_EQ(config->threads, 2);
}

// The worker checks what the scheduler resolved: a malformed assignment is
// refused naming the field, never trained or defaulted.
TEST(TrainerConfigTest, MalformedAssignmentIsRefusedNamingTheField) {
  v1::JobAssignment assignment = Assignment(Spec("adams"));
  assignment.mutable_spec()->mutable_optimizer()->set_name("lion");
  auto refused = TrainerConfigForAssignment(assignment, 0);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("spec.optimizer.name"), std::string::npos)
      << refused.status();
  v1::JobAssignment unresolved = Assignment(Spec("adams"));
  unresolved.mutable_spec()->mutable_data()->clear_sequence_length();
  refused = TrainerConfigForAssignment(unresolved, 0);
  EXPECT_NE(refused.status().message().find("spec.data.sequence_length"), std::string::npos)
      << refused.status();
}

TEST(TrainerConfigTest, DenseAssignmentNeedsNoMaskEpochAndMasksCarryTheGeneration) {
  auto config = TrainerConfigForAssignment(Assignment(Spec("adams")), 0);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->optimizer.scape.mask_epoch, 3u);
}

TEST(TrainerConfigTest, PingPongOnlyForRemoteAttention) {
  for (v1::AttentionMode mode : {v1::COLOCATED, v1::DISAGGREGATED, v1::IN_PLACE}) {
    v1::JobSpec spec = Spec("adamw");
    spec.mutable_attention()->set_mode(mode);
    spec.mutable_attention()->set_attention_servers(mode == v1::DISAGGREGATED ? 1 : 0);
    auto config = SubmittedConfig(spec);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->ping_pong, mode != v1::COLOCATED) << mode;
  }
}

TEST(TrainerConfigTest, UnknownNamesAreRefused) {
  EXPECT_EQ(SubmittedConfig(Spec("lion")).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::JobSpec spec = Spec("adamw");
  spec.mutable_model()->set_preset("huge");
  EXPECT_FALSE(SubmittedConfig(spec).ok());
}

TEST(TrainerConfigTest, ReferenceRuleAndDensityScheduleReachTheOptimizer) {
  v1::JobSpec spec = Spec("scape");
  v1::ScapeSpec& scape = *spec.mutable_optimizer()->mutable_scape();
  scape.set_rule("reference");
  scape.set_dense_small_tensors(true);
  scape.set_density(0.01);
  scape.mutable_density_schedule()->set_warmup_steps(200);
  scape.mutable_density_schedule()->set_start_step(5);
  scape.mutable_density_schedule()->set_shape("geometric");
  auto config = SubmittedConfig(spec);
  ASSERT_TRUE(config.ok()) << config.status();
  const optim::ScapeConfig& c = config->optimizer.scape;
  EXPECT_EQ(c.rule, optim::ScapeRule::kReference);
  EXPECT_TRUE(c.PerTensor());
  EXPECT_TRUE(c.dense_small_tensors);
  EXPECT_EQ(c.dense_warmup_steps, 0);  // the reference rule's first mask is synchronous
  EXPECT_DOUBLE_EQ(c.density_schedule.start, 1.0);
  EXPECT_EQ(c.density_schedule.warmup_steps, 200);
  EXPECT_EQ(c.density_schedule.start_step, 5);
  EXPECT_EQ(c.density_schedule.shape, optim::DensityShape::kGeometric);
  const nlohmann::json d = nlohmann::json::parse(DescribeTrainerConfig(*config));
  EXPECT_EQ(d["optimizer"]["scape"]["rule"], "reference");
  EXPECT_EQ(d["optimizer"]["grad_clip"], 1.0);  // the reference rule clips ĝ
  EXPECT_EQ(d["optimizer"]["scape"]["density_schedule"]["shape"], "geometric");
}

TEST(TrainerConfigTest, DescriptionIsJsonWithTheOptimizersSettings) {
  auto dense = SubmittedConfig(Spec("adamw"));
  auto sparse = SubmittedConfig(Spec("scape"));
  ASSERT_TRUE(dense.ok() && sparse.ok());
  const nlohmann::json d = nlohmann::json::parse(DescribeTrainerConfig(*dense));
  const nlohmann::json s = nlohmann::json::parse(DescribeTrainerConfig(*sparse));
  EXPECT_EQ(d["optimizer"]["grad_clip"], 1.0);
  EXPECT_FALSE(d["optimizer"].contains("scape"));
  EXPECT_FALSE(s["optimizer"].contains("grad_clip"));
  EXPECT_EQ(s["optimizer"]["scape"]["mask_statistic"], "momentum-plus-scaled-residual");
  auto topk = SubmittedConfig(Spec("topk-adamw"));
  ASSERT_TRUE(topk.ok());
  const nlohmann::json t = nlohmann::json::parse(DescribeTrainerConfig(*topk));
  EXPECT_EQ(t["optimizer"]["scape"]["density"], 0.1);
  EXPECT_EQ(t["optimizer"]["scape"]["density_schedule"]["warmup_steps"], 0);
  EXPECT_EQ(d["schedule"]["kind"], "cosine");
  EXPECT_EQ(d["steps"], 40);
}

}  // namespace
}  // namespace corescape::job
