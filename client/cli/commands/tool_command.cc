// `corescape data ...` and `corescape train-local ...`: thin front doors to
// the corescape-data and corescape-train-local tools, which link the
// runtime (the CLI itself depends on the API only). Arguments pass through;
// dashed flag names become the tools' absl spelling (--metrics-out →
// --metrics_out).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli/commands/cluster.h"
#include "client/cli/common.h"

namespace corescape::cli {
namespace {

std::string AbslFlagSpelling(const std::string& arg) {
  if (arg.size() < 3 || arg.rfind("--", 0) != 0) return arg;
  const size_t equals = arg.find('=');
  std::string name = arg.substr(0, equals);
  for (size_t i = 2; i < name.size(); ++i) {
    if (name[i] == '-') name[i] = '_';
  }
  return equals == std::string::npos ? name : name + arg.substr(equals);
}

int ExecTool(const std::string& binary_name, const std::string& package,
             const std::vector<std::string>& args) {
  absl::StatusOr<std::string> binary = FindDaemonBinary(binary_name, package, "");
  if (!binary.ok()) return Fail(kExitFailure, binary.status().message());
  std::vector<std::string> owned = {*binary};
  for (const std::string& arg : args) owned.push_back(AbslFlagSpelling(arg));
  std::vector<char*> argv;
  for (std::string& arg : owned) argv.push_back(arg.data());
  argv.push_back(nullptr);
  execv(binary->c_str(), argv.data());
  return Fail(kExitFailure, absl::StrCat("cannot run ", *binary, ": ", std::strerror(errno)));
}

Subcommand AddTool(CLI::App& parent, const std::string& name, const std::string& binary,
                   const std::string& package, const std::string& description) {
  CLI::App* app = parent.add_subcommand(name, description);
  // Everything after the name belongs to the tool, --help included.
  app->prefix_command();
  app->set_help_flag();
  return {app, [app, binary, package]() { return ExecTool(binary, package, app->remaining()); }};
}

}  // namespace

std::vector<Subcommand> AddToolCommands(CLI::App& parent) {
  return {
      AddTool(parent, "data", "corescape-data", "tools/data",
              "Prepare token shards from text (data prepare ...) and inspect them "
              "(data inspect SHARD); --help for details"),
      AddTool(parent, "train-local", "corescape-train-local", "tools/train",
              "Train a model in this process (debugging, benchmarks); --help for details"),
  };
}

}  // namespace corescape::cli
