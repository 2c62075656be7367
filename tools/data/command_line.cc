#include "tools/data/command_line.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace corescape::data::tools {

absl::StatusOr<std::vector<std::string>> ParseFlags(int argc, char** argv, int first,
                                                    const std::set<std::string>& allowed) {
  std::vector<std::string> positional;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional.emplace_back(argv[i]);
      break;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      positional.push_back(arg);
      continue;
    }
    std::string body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    size_t equals = body.find('=');
    std::string name = body.substr(0, equals);
    bool has_value = equals != std::string::npos;
    std::string value = has_value ? body.substr(equals + 1) : "";
    absl::CommandLineFlag* flag = allowed.contains(name) ? absl::FindCommandLineFlag(name) : nullptr;
    // --noname for a boolean flag.
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated =
          allowed.contains(name.substr(2)) ? absl::FindCommandLineFlag(name.substr(2)) : nullptr;
      if (negated != nullptr && negated->IsOfType<bool>()) {
        flag = negated;
        has_value = true;
        value = "false";
      }
    }
    if (flag == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    if (!has_value) {
      if (flag->IsOfType<bool>()) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad value \"", value, "\" for --", name, ": ", error));
    }
  }
  return positional;
}

std::string DescribeFlags(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    absl::StrAppend(&out, "  --", name, "  ", flag->Help(), " (default: \"",
                    flag->DefaultValue(), "\")\n");
  }
  return out;
}

}  // namespace corescape::data::tools
