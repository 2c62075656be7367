// `corescape drain NODE`: stop giving a node new work (DrainNode).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli/common.h"
#include "client/cli/rendering/output.h"

namespace corescape::cli {

namespace {

struct DrainOptions {
  std::string node;
  std::string reason;
  bool json = false;
};

int RunDrain(const DrainOptions& options, client::SchedulerClient& client,
             const SchedulerTarget& target) {
  v1::DrainNodeRequest request;
  request.set_name(options.node);
  request.set_reason(options.reason.empty() ? "drained by operator"
                                            : options.reason);
  auto response = client.DrainNode(request);
  if (!response.ok()) {
    // The scheduler's wording may vary; the operator's question is always
    // "did I mistype the name?".
    if (absl::IsNotFound(response.status())) {
      return Fail(kExitNotFound,
                  absl::StrCat("no node named '", options.node, "'"));
    }
    return FailRpc(response.status(), target, "DrainNode");
  }
  const v1::NodeInfo& node = response->node();
  if (options.json) {
    PrintJson(NodeToJson(node));
  } else {
    std::cout << "node " << (node.name().empty() ? options.node : node.name())
              << " is now " << NodeStateName(node.state()) << std::endl;
  }
  return kExitOk;
}

}  // namespace

Subcommand AddDrainCommand(CLI::App& parent, GlobalOptions& globals) {
  auto drain = AddSchedulerCommand<DrainOptions>(
      parent, globals, "drain", "Drain a node: it finishes its work and takes nothing new");
  drain.app->add_option("NODE", drain.options->node, "Name of the node to drain")->required();
  drain.app
      ->add_option("--reason", drain.options->reason, "Why, recorded in the cluster events")
      ->type_name("TEXT");
  drain.app->add_flag("--json", drain.options->json, "Print the drained node as a JSON object");
  return drain.RunsWith(RunDrain);
}

}  // namespace corescape::cli
