// `corescape status`: the scheduler's view of the whole cluster.
#include <iostream>
#include <memory>

#include "absl/time/clock.h"
#include "client/cli/common.h"
#include "client/cli/rendering/output.h"

namespace corescape::cli {

namespace {

int RunStatus(bool json, const GlobalOptions& globals) {
  SchedulerTarget target;
  int exit_code = kExitOk;
  auto client = ConnectOrFail(globals, &target, &exit_code);
  if (client == nullptr) return exit_code;

  auto status = client->GetClusterStatus();
  if (!status.ok()) return FailRpc(status.status(), target, "GetClusterStatus");

  const int64_t now_unix_ms = absl::ToUnixMillis(absl::Now());
  if (json) {
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
  auto json = std::make_shared<bool>(false);
  CLI::App* command = parent.add_subcommand(
      "status", "Show the cluster summary and recent events");
  AddGlobalOptions(*command, globals);
  command->add_flag("--json", *json, "Print the status as a JSON object");
  return {command, [json, &globals]() { return RunStatus(*json, globals); }};
}

}  // namespace corescape::cli
