// `corescape jobs`: the scheduler's jobs, newest first (ListJobs).
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/cli/common.h"
#include "client/cli/rendering/job_output.h"

namespace corescape::cli {

namespace {

struct JobsOptions {
  bool json = false;
  std::vector<std::string> states;  // lowercase state names
};

const std::map<std::string, v1::JobState>& JobStatesByFlag() {
  static const auto* states = new std::map<std::string, v1::JobState>{
      {"pending", v1::PENDING},     {"running", v1::RUNNING},
      {"recovering", v1::RECOVERING}, {"succeeded", v1::SUCCEEDED},
      {"failed", v1::FAILED},       {"cancelled", v1::CANCELLED}};
  return *states;
}

int RunJobs(const JobsOptions& options, client::SchedulerClient& client,
            const SchedulerTarget& target) {
  v1::ListJobsRequest request;
  for (const auto& state : options.states) {
    request.add_states(JobStatesByFlag().at(state));
  }
  absl::StatusOr<std::vector<v1::Job>> listed = client.ListAllJobs(request);
  if (!listed.ok()) return FailRpc(listed.status(), target, "ListJobs");

  std::vector<v1::Job> jobs = *std::move(listed);
  SortJobsNewestFirst(jobs);
  if (options.json) {
    PrintJson(JobsToJson(jobs));
  } else if (jobs.empty()) {
    std::cout << (options.states.empty() ? "no jobs" : "no jobs in that state")
              << " on the scheduler at " << target.address << std::endl;
  } else {
    std::cout << RenderJobsTable(jobs, absl::ToUnixMillis(absl::Now()));
    std::cout.flush();
  }
  return kExitOk;
}

}  // namespace

Subcommand AddJobsCommand(CLI::App& parent, GlobalOptions& globals) {
  auto jobs = AddSchedulerCommand<JobsOptions>(parent, globals, "jobs",
                                               "List training jobs, newest first");
  jobs.app->add_flag("--json", jobs.options->json, "Print a JSON array, one object per job");
  jobs.app
      ->add_option("--state", jobs.options->states,
                   "Only jobs in this state (repeatable)")
      ->type_name("STATE")
      ->allow_extra_args(false)
      ->check(CLI::IsMember({"pending", "running", "recovering", "succeeded",
                             "failed", "cancelled"}));
  return jobs.RunsWith(RunJobs);
}

}  // namespace corescape::cli
