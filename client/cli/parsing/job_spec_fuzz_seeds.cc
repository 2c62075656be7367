#include "client/cli/parsing/job_spec_fuzz_seeds.h"

#include "corescape/v1/job.pb.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/job/job_spec.h"

namespace corescape::cli {
namespace {

v1::JobSpec FullSpec() {
  v1::JobSpec spec;
  spec.set_name("fuzz-seed");
  spec.set_steps(300);
  spec.set_eval_interval_steps(50);
  spec.set_seed(7);
  spec.set_device(v1::CUDA);
  v1::ModelSpec& model = *spec.mutable_model();
  model.set_preset("tiny");
  model.set_n_layers(2);
  model.set_n_kv_heads(2);
  model.set_rope_theta(10000);
  v1::DataSpec& data = *spec.mutable_data();
  data.add_train_shards("/data/fortunes");
  data.add_validation_shards("/data/fortunes-validation");
  data.set_sequence_length(128);
  data.set_micro_batch_size(4);
  data.set_gradient_accumulation(2);
  v1::OptimizerSpec& opt = *spec.mutable_optimizer();
  opt.set_name("scape");
  opt.set_learning_rate(3e-3);
  opt.set_min_learning_rate(3e-4);
  opt.set_grad_clip(1.0);
  opt.set_schedule("cosine");
  opt.set_warmup_steps(20);
  opt.mutable_scape()->set_density(0.1);
  opt.mutable_scape()->set_mask_statistic("momentum-plus-residual");
  v1::CheckpointSpec& checkpoint = *spec.mutable_checkpoint();
  checkpoint.set_directory("/var/lib/corescape/worker/checkpoints");
  checkpoint.set_interval_steps(100);
  checkpoint.set_keep(2);
  v1::PlacementSpec& placement = *spec.mutable_placement();
  placement.set_workers(2);
  placement.set_min_workers(1);
  placement.add_node_names("worker-0");
  placement.add_node_names("worker-1");
  v1::AttentionSpec& attention = *spec.mutable_attention();
  attention.set_mode(v1::DISAGGREGATED);
  attention.set_attention_servers(2);
  attention.set_tolerance(0.05);
  attention.set_keep_qkv_for_backward(false);
  attention.set_ping_pong(true);
  return spec;
}

std::string ToJson(const v1::JobSpec& spec, bool snake_case) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = snake_case;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(spec, &json, options);
  return json;
}

}  // namespace

std::vector<std::string> JobSpecJsonSeeds() {
  const v1::JobSpec full = FullSpec();
  v1::JobSpec minimal;
  minimal.mutable_data()->add_train_shards("shard");
  return {ToJson(full, true), ToJson(full, false), ToJson(minimal, true),
          "// a comment\n{\"name\": \"x\", /* and another */ \"steps\": \"5\"}"};
}

std::vector<std::string> JobSpecYamlSeeds() {
  return {R"(---
# every construct of the subset
name: tiny-fortunes
model:
  preset: tiny
  nKvHeads: 2
data:
  train_shards: [a, "b", 'c''s']
  validation_shards:
    - "v\u00e9\tx"
    - ~
  sequence_length: 128    # tokens
  micro_batch_size: 4
optimizer:
  name: 'scape'
  learning_rate: 3e-3
  scape:
    density: 0.1
    offload_residuals: false
checkpoint:
  directory: /ckpt
  interval_steps: 100
placement:
  workers: 2
  node_names: [worker-0, worker-1]
attention:
  mode: disaggregated
  attention_servers: 1
steps: 300
seed: 7
)",
          "name: x\noptimizer: {}\ndata:\n  train_shards: []\n"};
}

void ApplyAndValidate(v1::JobSpec spec) {
  job::ResolveJobSpec(std::move(spec)).status().IgnoreError();
}

}  // namespace corescape::cli
