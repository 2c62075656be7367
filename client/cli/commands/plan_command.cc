// `corescape plan JOB`: the scheduler's newest core-attention plan of a
// DISAGGREGATED job (GetAttentionPlan).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli/common.h"
#include "client/cli/rendering/plan_output.h"

namespace corescape::cli {

namespace {

struct PlanOptions {
  std::string job_id;
  bool tasks = false;
  bool json = false;
};

int RunPlan(const PlanOptions& options, client::SchedulerClient& client,
            const SchedulerTarget& target) {
  v1::GetAttentionPlanRequest request;
  request.set_job_id(options.job_id);
  auto response = client.GetAttentionPlan(request);
  // NOT_FOUND (no such job) exits 4; a job that is not DISAGGREGATED or has
  // no planned step yet is FAILED_PRECONDITION, exit 1 with the reason.
  if (!response.ok()) {
    return FailJobRpc(response.status(), target, "GetAttentionPlan", options.job_id);
  }
  if (options.json) {
    PrintJson(AttentionPlanToJson(response->plan(), options.tasks));
  } else {
    std::cout << RenderAttentionPlan(response->plan(), absl::ToUnixMillis(absl::Now()),
                                     options.tasks);
    std::cout.flush();
  }
  return kExitOk;
}

}  // namespace

Subcommand AddPlanCommand(CLI::App& parent, GlobalOptions& globals) {
  auto plan = AddSchedulerCommand<PlanOptions>(
      parent, globals, "plan",
      "Show the scheduler's newest core-attention plan of a DISAGGREGATED job: per attention "
      "server its speed weight, planned cost and share, tasks and bytes; imbalance and bytes "
      "moved");
  AddJobArgument(*plan.app, plan.options->job_id);
  plan.app->add_flag("--tasks", plan.options->tasks,
                     "Also list every task (worker, document, query range, server)");
  plan.app->add_flag("--json", plan.options->json, "Print the plan as a JSON object");
  return plan.RunsWith(RunPlan);
}

}  // namespace corescape::cli
