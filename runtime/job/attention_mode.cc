#include "runtime/job/attention_mode.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace corescape::job {
namespace {

constexpr std::pair<const char*, v1::AttentionMode> kAttentionModes[] = {
    {"colocated", v1::COLOCATED},
    {"disaggregated", v1::DISAGGREGATED},
    {"in-place", v1::IN_PLACE},
};

}  // namespace

std::vector<std::string> AttentionModeNames() {
  std::vector<std::string> names;
  for (const auto& [name, mode] : kAttentionModes) names.push_back(name);
  return names;
}

std::string AttentionModeNameList() { return absl::StrJoin(AttentionModeNames(), ", "); }

absl::StatusOr<v1::AttentionMode> ParseAttentionMode(absl::string_view name) {
  if (name == "in_place") return v1::IN_PLACE;  // the enum's spelling, lower-cased
  for (const auto& [known, mode] : kAttentionModes) {
    if (name == known) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode '", name, "' (one of ", AttentionModeNameList(), ")"));
}

}  // namespace corescape::job
