#include "runtime/base/node_name.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace corescape {

absl::Status ValidateNodeName(absl::string_view field, absl::string_view name) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  if (name.empty()) return invalid("required");
  if (name.size() > kMaxNodeNameLength) {
    return invalid(absl::StrCat("must be 1..", kMaxNodeNameLength, " characters, got ",
                                name.size()));
  }
  if (!absl::ascii_isalnum(static_cast<unsigned char>(name.front()))) {
    return invalid("must start with a letter or digit");
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' &&
        c != '_') {
      return invalid("may contain only letters, digits, '.', '-' and '_'");
    }
  }
  return absl::OkStatus();
}

}  // namespace corescape
