// `corescape nodes`: the scheduler's node registry (ListNodes).
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/cli/common.h"
#include "client/cli/rendering/output.h"

namespace corescape::cli {

namespace {

struct NodesOptions {
  bool json = false;
  std::string role;                 // "", "worker" or "attention-server"
  std::vector<std::string> states;  // lowercase state names
};

const std::map<std::string, v1::NodeRole>& RolesByFlag() {
  static const auto* roles = new std::map<std::string, v1::NodeRole>{
      {"worker", v1::WORKER}, {"attention-server", v1::ATTENTION_SERVER}};
  return *roles;
}

const std::map<std::string, v1::NodeState>& StatesByFlag() {
  static const auto* states = new std::map<std::string, v1::NodeState>{
      {"alive", v1::ALIVE},
      {"dead", v1::DEAD},
      {"draining", v1::DRAINING},
      {"deregistered", v1::DEREGISTERED}};
  return *states;
}

int RunNodes(const NodesOptions& options, client::SchedulerClient& client,
             const SchedulerTarget& target) {
  v1::ListNodesRequest request;
  if (!options.role.empty()) request.set_role(RolesByFlag().at(options.role));
  for (const auto& state : options.states) {
    request.add_states(StatesByFlag().at(state));
  }
  absl::StatusOr<std::vector<v1::NodeInfo>> listed = client.ListAllNodes(request);
  if (!listed.ok()) return FailRpc(listed.status(), target, "ListNodes");

  std::vector<v1::NodeInfo> nodes = *std::move(listed);
  SortNodesForDisplay(nodes);
  if (options.json) {
    PrintJson(NodesToJson(nodes));
  } else if (nodes.empty()) {
    std::cout << "no nodes registered with the scheduler at " << target.address
              << std::endl;
  } else {
    std::cout << RenderNodesTable(nodes, absl::ToUnixMillis(absl::Now()));
  }
  return kExitOk;
}

}  // namespace

Subcommand AddNodesCommand(CLI::App& parent, GlobalOptions& globals) {
  auto nodes = AddSchedulerCommand<NodesOptions>(
      parent, globals, "nodes", "List the nodes registered with the scheduler");
  nodes.app->add_flag("--json", nodes.options->json, "Print a JSON array, one object per node");
  nodes.app->add_option("--role", nodes.options->role, "Only nodes of this role")
      ->type_name("ROLE")
      ->check(CLI::IsMember({"worker", "attention-server"}));
  nodes.app->add_option("--state", nodes.options->states, "Only nodes in this state (repeatable)")
      ->type_name("STATE")
      ->check(CLI::IsMember({"alive", "dead", "draining", "deregistered"}));
  return nodes.RunsWith(RunNodes);
}

}  // namespace corescape::cli
