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

struct JobOptions {
  std::string job_id;
  bool json = false;
};

int RunJob(const JobOptions& options, client::SchedulerClient& client,
           const SchedulerTarget& target) {
  int exit_code = kExitOk;
  std::optional<v1::Job> job = GetJobOrFail(client, target, options.job_id, &exit_code);
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
  auto job = AddSchedulerCommand<JobOptions>(
      parent, globals, "job", "Show one job: spec, state and reason, nodes by rank, progress");
  AddJobArgument(*job.app, job.options->job_id);
  job.app->add_flag("--json", job.options->json, "Print the job as a JSON object");
  return job.RunsWith(RunJob);
}

}  // namespace corescape::cli
