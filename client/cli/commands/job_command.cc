// `corescape job JOB`: one job in detail (GetJob).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli/common.h"
#include "client/cli/rendering/job_output.h"

namespace corescape::cli {

namespace {

namespace v1 = ::corescape::v1;

struct JobOptions {
  std::string job_id;
  bool json = false;
};

int RunJob(const JobOptions& options, const GlobalOptions& globals) {
  SchedulerTarget target;
  int exit_code = kExitOk;
  auto client = ConnectOrFail(globals, &target, &exit_code);
  if (client == nullptr) return exit_code;

  std::optional<v1::Job> job = GetJobOrFail(*client, target, options.job_id, &exit_code);
  if (!job) return exit_code;
  if (options.json) {
    PrintJson(JobToJson(*job));
  } else {
    std::cout << RenderJobDetails(*job, absl::ToUnixMillis(absl::Now()));
    std::cout.flush();
  }
  return kExitOk;
}

}  // namespace

Subcommand AddJobCommand(CLI::App& parent, GlobalOptions& globals) {
  auto options = std::make_shared<JobOptions>();
  CLI::App* command = parent.add_subcommand(
      "job", "Show one job: spec, state and reason, nodes by rank, progress");
  AddGlobalOptions(*command, globals);
  command->add_option("JOB", options->job_id, "Job id")->required();
  command->add_flag("--json", options->json, "Print the job as a JSON object");
  return {command, [options, &globals]() { return RunJob(*options, globals); }};
}

}  // namespace corescape::cli
