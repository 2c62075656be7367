// `corescape cancel JOB`: stop a job (CancelJob).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli/common.h"
#include "client/cli/rendering/job_output.h"
#include "client/job_watch.h"

namespace corescape::cli {

namespace {

struct CancelOptions {
  std::string job_id;
  std::string reason;
  bool json = false;
};

int RunCancel(const CancelOptions& options, client::SchedulerClient& client,
              const SchedulerTarget& target) {
  v1::CancelJobRequest request;
  request.set_job_id(options.job_id);
  request.set_reason(options.reason.empty() ? "cancelled by operator"
                                            : options.reason);
  absl::StatusOr<v1::CancelJobResponse> response = client.CancelJob(request);
  if (!response.ok()) {
    return FailJobRpc(response.status(), target, "CancelJob", options.job_id);
  }
  const v1::Job& job = response->job();
  const std::string job_id = job.job_id().empty() ? options.job_id : job.job_id();
  if (options.json) {
    PrintJson(JobToJson(job));
  } else if (job.state() == v1::CANCELLED) {
    std::cout << "job " << job_id << " is CANCELLED" << std::endl;
  } else if (client::IsTerminalJobState(job.state())) {
    std::cout << "job " << job_id << " had already ended: "
              << JobStateName(job.state()) << std::endl;
  } else {
    std::cout << "cancelling job " << job_id << " (now "
              << JobStateName(job.state()) << ")" << std::endl;
  }
  return kExitOk;
}

}  // namespace

Subcommand AddCancelCommand(CLI::App& parent, GlobalOptions& globals) {
  auto cancel = AddSchedulerCommand<CancelOptions>(
      parent, globals, "cancel", "Cancel a job; its workers stop it and become free");
  AddJobArgument(*cancel.app, cancel.options->job_id);
  cancel.app
      ->add_option("--reason", cancel.options->reason,
                   "Why, recorded as the job's state reason")
      ->type_name("TEXT");
  cancel.app->add_flag("--json", cancel.options->json,
                       "Print the job after the cancel as a JSON object");
  return cancel.RunsWith(RunCancel);
}

}  // namespace corescape::cli
