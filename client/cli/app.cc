#include "client/cli/app.h"

#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "client/cli/common.h"
#include "corescape_version.h"

namespace corescape::cli {

namespace {

// The chain of commands given on the command line: corescape, cluster, up.
std::vector<const CLI::App*> ParsedCommandChain(const CLI::App& app) {
  std::vector<const CLI::App*> chain = {&app};
  while (true) {
    std::vector<const CLI::App*> selected = chain.back()->get_subcommands(
        [](const CLI::App* sub) { return sub->parsed(); });
    if (selected.empty()) return chain;
    chain.push_back(selected.front());
  }
}

// "Run 'corescape cluster up --help' for usage." for the deepest command
// given, so the hint points at the right --help.
std::string UsageHint(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : ParsedCommandChain(app)) {
    names.push_back(command->get_name());
  }
  return absl::StrCat("Run '", absl::StrJoin(names, " "),
                      " --help' for usage.");
}

int UsageError(const CLI::App& app, absl::string_view message) {
  std::cout.flush();
  std::cerr << "corescape: error: " << message << "\n"
            << UsageHint(app) << std::endl;
  return kExitUsage;
}

// `corescape` or `corescape cluster` alone: name what could follow.
int MissingCommand(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub :
       ParsedCommandChain(app).back()->get_subcommands(nullptr)) {
    names.push_back(sub->get_name());
  }
  return UsageError(app, absl::StrCat("missing command; one of: ",
                                      absl::StrJoin(names, ", ")));
}

}  // namespace

int RunCorescapeCli(int argc, const char* const* argv) {
  CLI::App app(
      "corescape: operate a corescape cluster (nodes, status, draining, a "
      "local cluster for development, its certificates), its training jobs (submit, jobs, "
      "job, watch, cancel, plot) and their core-attention plans (plan, "
      "rebalance).\n"
      "Exit codes: 0 ok, 1 failure, 2 usage error, 3 scheduler unreachable, "
      "4 not found, 5 invalid argument.",
      "corescape");
  app.set_version_flag("--version",
                       std::string("corescape ") + CORESCAPE_VERSION);

  GlobalOptions globals;
  AddGlobalOptions(app, globals);

  std::vector<Subcommand> subcommands = {
      AddVersionCommand(app),
      AddNodesCommand(app, globals),
      AddStatusCommand(app, globals),
      AddDrainCommand(app, globals),
      AddSubmitCommand(app, globals),
      AddJobsCommand(app, globals),
      AddJobCommand(app, globals),
      AddWatchCommand(app, globals),
      AddCancelCommand(app, globals),
      AddPlotCommand(app, globals),
      AddPlanCommand(app, globals),
      AddRebalanceCommand(app, globals),
      AddCertsCommand(app),
  };
  for (auto& cluster_command : AddClusterCommands(app)) {
    subcommands.push_back(std::move(cluster_command));
  }
  for (auto& tool_command : AddToolCommands(app)) {
    subcommands.push_back(std::move(tool_command));
  }

  // CLI11 reports parse problems, --help and --version by throwing; this is
  // the one place they are caught and turned into output and an exit code.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(error);  // --help / --version: print, exit 0
    }
    return UsageError(app, error.what());
  }

  for (const auto& subcommand : subcommands) {
    if (subcommand.app->parsed()) return subcommand.run();
  }
  // `corescape` or `corescape cluster` alone. Checked here rather than with
  // CLI11's require_subcommand, which would report "A subcommand is
  // required" even for a misspelled one.
  return MissingCommand(app);
}

}  // namespace corescape::cli
