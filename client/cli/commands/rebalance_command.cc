// `corescape rebalance [JOB]`: re-derive the attention servers' speed
// weights from their timings and re-plan now (Rebalance).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli/common.h"
#include "client/cli/rendering/plan_output.h"

namespace corescape::cli {

namespace {

struct RebalanceOptions {
  std::string job_id;  // empty: every running DISAGGREGATED job
  bool json = false;
};

int RunRebalance(const RebalanceOptions& options, client::SchedulerClient& client,
                 const SchedulerTarget& target) {
  v1::RebalanceRequest request;
  request.set_job_id(options.job_id);
  auto response = client.Rebalance(request);
  if (!response.ok()) {
    return FailJobRpc(response.status(), target, "Rebalance", options.job_id);
  }
  if (options.json) {
    nlohmann::json plans = nlohmann::json::array();
    for (const v1::AttentionPlan& plan : response->plans()) {
      plans.push_back(AttentionPlanToJson(plan, /*with_tasks=*/false));
    }
    PrintJson(plans);
    return kExitOk;
  }
  if (response->plans().empty()) {
    std::cout << "no running DISAGGREGATED job with a planned step to rebalance" << std::endl;
    return kExitOk;
  }
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (int i = 0; i < response->plans_size(); ++i) {
    if (i > 0) std::cout << "\n";
    std::cout << RenderAttentionPlan(response->plans(i), now_ms, /*with_tasks=*/false);
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace

Subcommand AddRebalanceCommand(CLI::App& parent, GlobalOptions& globals) {
  auto rebalance = AddSchedulerCommand<RebalanceOptions>(
      parent, globals, "rebalance",
      "Re-derive attention-server speed weights from their task timings and re-plan the newest "
      "step of a DISAGGREGATED job (all running ones without JOB); prints the new plans");
  rebalance.app->add_option("JOB", rebalance.options->job_id,
                            "Job id (default: every running job)");
  rebalance.app->add_flag("--json", rebalance.options->json,
                          "Print a JSON array, one object per plan");
  return rebalance.RunsWith(RunRebalance);
}

}  // namespace corescape::cli
