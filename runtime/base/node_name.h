#ifndef CORESCAPE_RUNTIME_BASE_NODE_NAME_H_
#define CORESCAPE_RUNTIME_BASE_NODE_NAME_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace corescape {

inline constexpr int kMaxNodeNameLength = 63;

// A node's name is its identity across restarts: 1..63 letters, digits,
// '.', '-' or '_', starting with a letter or digit (safe in logs, file
// names, DNS labels and JSON). INVALID_ARGUMENT naming `field` otherwise.
absl::Status ValidateNodeName(absl::string_view field, absl::string_view name);

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_NODE_NAME_H_
