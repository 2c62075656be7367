#ifndef CORESCAPE_TOOLS_DATA_COMMANDS_H_
#define CORESCAPE_TOOLS_DATA_COMMANDS_H_

#include <set>
#include <string>
#include <vector>

namespace corescape::data::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Prints "corescape-data: error: <message>" to stderr and returns `code`.
int Fail(int code, const std::string& message);

extern const std::set<std::string> kPrepareFlags;
extern const std::set<std::string> kInspectFlags;

// Each runs with the absl flags already set; returns the exit code.
int RunPrepare(const std::vector<std::string>& positional);
int RunInspect(const std::vector<std::string>& positional);

}  // namespace corescape::data::tools

#endif  // CORESCAPE_TOOLS_DATA_COMMANDS_H_
