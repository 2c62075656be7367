#include "runtime/attention/micro_batch_plan_input.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace corescape::attention {

planner::ModelShape PlannerModelShape(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim) {
  planner::ModelShape model;
  model.hidden = int64_t{n_heads} * head_dim;
  model.n_heads = n_heads;
  model.n_kv_heads = n_kv_heads;
  model.head_dim = head_dim;
  model.bytes_per_element = sizeof(float);  // fp32 on the wire
  return model;
}

absl::StatusOr<planner::PlanInput> MicroBatchPlanInput(
    std::vector<std::vector<int64_t>> worker_documents, const planner::ModelShape& model,
    const PlanOptions& options) {
  if (options.servers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention plan: ", options.servers, " servers"));
  }
  planner::PlanInput input;
  input.worker_documents = std::move(worker_documents);
  input.servers.assign(options.servers, planner::AttentionServer{});
  if (!options.server_speeds.empty()) {
    if (static_cast<int32_t>(options.server_speeds.size()) != options.servers) {
      return absl::InvalidArgumentError(
          absl::StrCat("attention plan: ", options.server_speeds.size(), " server speeds for ",
                       options.servers, " servers"));
    }
    // The planner refuses speeds that are not finite and > 0.
    for (int32_t s = 0; s < options.servers; ++s) input.servers[s].speed = options.server_speeds[s];
  }
  if (options.in_place) {
    if (static_cast<size_t>(options.servers) != input.worker_documents.size()) {
      return absl::InvalidArgumentError(absl::StrCat("in-place attention plan: ", options.servers,
                                                     " servers for ", input.worker_documents.size(),
                                                     " workers (each worker is a server)"));
    }
    for (int32_t s = 0; s < options.servers; ++s) input.servers[s].colocated_worker = s;
  }
  input.model = model;
  return input;
}

}  // namespace corescape::attention
