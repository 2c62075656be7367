// `corescape status`: the scheduler's view of the whole cluster.
#include <iostream>
#include <memory>

#include "absl/time/clock.h"
#include "client/cli/common.h"
#include "client/cli/rendering/output.h"

namespace corescape::cli {

namespace {

struct StatusOptions {
  bool json = false;
};

int RunStatus(const StatusOptions& options, client::SchedulerClient& client,
              const SchedulerTarget& target) {
  auto status = client.GetClusterStatus();
  if (!status.ok()) return FailRpc(status.status(), target, "GetClusterStatus");

  const int64_t now_unix_ms = absl::ToUnixMillis(absl::Now());
  if (options.json) {
    nlohmann::json out = ClusterStatusToJson(*status, now_unix_ms);
    out["scheduler_address"] = target.address;
    PrintJson(out);
  } else {
    std::cout << "Address:    " << target.address << "\n"
              << RenderClusterStatus(*status, now_unix_ms);
    std::cout.flush();
  }
  return kExitOk;
}

}  // namespace

Subcommand AddStatusCommand(CLI::App& parent, GlobalOptions& globals) {
  auto status = AddSchedulerCommand<StatusOptions>(
      parent, globals, "status", "Show the cluster summary and recent events");
  status.app->add_flag("--json", status.options->json, "Print the status as a JSON object");
  return status.RunsWith(RunStatus);
}

}  // namespace corescape::cli
