// `corescape version`: the release this CLI was built from (//:VERSION).
#include <iostream>
#include <memory>

#include "client/cli/common.h"
#include "corescape_version.h"

namespace corescape::cli {

Subcommand AddVersionCommand(CLI::App& parent) {
  auto json = std::make_shared<bool>(false);
  CLI::App* command =
      parent.add_subcommand("version", "Print the corescape version");
  command->add_flag("--json", *json, "Print {\"version\": ...} as JSON");
  return {command, [json]() {
            if (*json) {
              PrintJson({{"version", CORESCAPE_VERSION}});
            } else {
              std::cout << "corescape " << CORESCAPE_VERSION << std::endl;
            }
            return static_cast<int>(kExitOk);
          }};
}

}  // namespace corescape::cli
