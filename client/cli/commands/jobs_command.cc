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

namespace v1 = ::corescape::v1;

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

int RunJobs(const JobsOptions& options, const GlobalOptions& globals) {
  SchedulerTarget target;
  int exit_code = kExitOk;
  auto client = ConnectOrFail(globals, &target, &exit_code);
  if (client == nullptr) return exit_code;

  v1::ListJobsRequest request;
  for (const auto& state : options.states) {
    request.add_states(JobStatesByFlag().at(state));
  }
  absl::StatusOr<std::vector<v1::Job>> listed = client->ListAllJobs(request);
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
  auto options = std::make_shared<JobsOptions>();
  CLI::App* command =
      parent.add_subcommand("jobs", "List training jobs, newest first");
  AddGlobalOptions(*command, globals);
  command->add_flag("--json", options->json,
                    "Print a JSON array, one object per job");
  command
      ->add_option("--state", options->states,
                   "Only jobs in this state (repeatable)")
      ->type_name("STATE")
      ->allow_extra_args(false)
      ->check(CLI::IsMember({"pending", "running", "recovering", "succeeded",
                             "failed", "cancelled"}));
  return {command,
          [options, &globals]() { return RunJobs(*options, globals); }};
}

}  // namespace corescape::cli
