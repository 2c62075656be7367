#include "scheduler/attention_plan_builder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/attention/micro_batch_plan_input.h"
#include "runtime/job/job_spec.h"
#include "runtime/planner/attention_planner.h"

namespace corescape::scheduler {

absl::StatusOr<planner::ModelShape> AttentionModelShape(const v1::JobSpec& spec) {
  // The model the workers build (they resolve the spec the same way).
  auto config = job::ModelConfigFromSpec(spec.model());
  if (!config.ok()) return config.status();
  if (config->n_heads <= 0 || config->d_model % config->n_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: d_model ", config->d_model, " is not a multiple of n_heads ", config->n_heads));
  }
  return attention::PlannerModelShape(config->n_heads, config->n_kv_heads, config->head_dim());
}

absl::StatusOr<v1::AttentionPlan> BuildAttentionPlan(
    const v1::Job& job, int64_t step, std::vector<std::vector<int64_t>> worker_documents,
    const std::vector<PlannedServer>& servers, const std::vector<std::string>& excluded,
    absl::Time now) {
  auto model = AttentionModelShape(job.spec());
  if (!model.ok()) return model.status();
  std::vector<int64_t> worker_tokens;
  for (const auto& documents : worker_documents) {
    int64_t tokens = 0;
    for (int64_t length : documents) tokens += length;
    worker_tokens.push_back(tokens);
  }
  const double tolerance = job.spec().attention().tolerance();
  // The participants' input (runtime/attention), with the servers' weights.
  attention::PlanOptions options;
  options.servers = static_cast<int32_t>(servers.size());
  options.tolerance = tolerance;
  for (const PlannedServer& server : servers) options.server_speeds.push_back(server.speed_weight);
  auto input = attention::MicroBatchPlanInput(std::move(worker_documents), *model, options);
  if (!input.ok()) return input.status();
  auto planned = planner::PlanAttention(*input, planner::PlannerOptions{tolerance});
  if (!planned.ok()) return planned.status();

  v1::AttentionPlan plan;
  plan.set_job_id(job.job_id());
  plan.set_generation(job.generation());
  plan.set_attention_epoch(job.attention_epoch());
  plan.set_step(step);
  plan.set_tolerance(tolerance);
  plan.set_imbalance(planned->imbalance);
  plan.set_bytes_moved(planned->bytes_moved);
  plan.set_planned_unix_ms(absl::ToUnixMillis(now));
  for (size_t s = 0; s < servers.size(); ++s) {
    const planner::ServerLoad& load = planned->servers[s];
    plan.add_attention_server_addresses(servers[s].address);
    plan.add_server_names(servers[s].name);
    plan.add_server_speed_weights(servers[s].speed_weight);
    plan.add_server_measured_speed(servers[s].measured_speed);
    plan.add_server_cost(load.flops);
    plan.add_server_tasks(load.tasks);
    plan.add_server_bytes_received(load.bytes_received);
  }
  for (int64_t tokens : worker_tokens) plan.add_worker_tokens(tokens);
  for (const std::string& name : excluded) plan.add_excluded_servers(name);
  for (const planner::PlannedTask& task : planned->tasks) {
    v1::AttentionTask* out = plan.add_tasks();
    out->set_worker_rank(task.worker);
    out->set_document(task.document);
    out->set_q_begin(task.q_begin);
    out->set_q_end(task.q_end);
    out->set_server(task.server);
  }
  return plan;
}

absl::StatusOr<v1::AttentionStepPlan::MicroBatch> EpochMicroBatch(
    const v1::AttentionPlan& plan, const std::vector<PlannedServer>& servers) {
  v1::AttentionStepPlan::MicroBatch micro_batch;
  for (const v1::AttentionTask& task : plan.tasks()) {
    if (task.server() < 0 || task.server() >= static_cast<int>(servers.size())) {
      return absl::InternalError(absl::StrCat("planned task names server ", task.server(),
                                              " of ", servers.size()));
    }
    v1::AttentionTask* out = micro_batch.add_tasks();
    *out = task;
    out->set_server(servers[task.server()].epoch_index);
  }
  return micro_batch;
}

}  // namespace corescape::scheduler
