#ifndef CORESCAPE_TOOLS_DATA_COMMAND_LINE_H_
#define CORESCAPE_TOOLS_DATA_COMMAND_LINE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace corescape::data::tools {

// Sets the absl flags given as --name=value or --name value (and --name /
// --noname for booleans) among argv[first..], accepting only `allowed`
// names; "--" ends the flags. Returns the positional arguments. Every
// error is a usage error (InvalidArgument) with a message for the user;
// unlike absl::ParseCommandLine it never exits, so the caller picks the
// exit code.
absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv, int first,
                                                    const std::set<std::string>& allowed);

// "  --name  help (default: value)" lines for the given flags.
std::string DescribeFlags(const std::set<std::string>& names);

}  // namespace corescape::data::tools

#endif  // CORESCAPE_TOOLS_DATA_COMMAND_LINE_H_
