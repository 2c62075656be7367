#include "tools/scape/run_shape_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "runtime/optim/scape_config.h"

ABSL_FLAG(std::string, data, "", "dataset directory (corescape data prepare)");
ABSL_FLAG(std::string, model, "tiny", "model preset");
ABSL_FLAG(int32_t, ranks, 4, "data-parallel ranks (world size)");
ABSL_FLAG(int32_t, seq_len, 128, "tokens per row");
ABSL_FLAG(int32_t, micro_batch, 8, "rows per rank per step");
ABSL_FLAG(std::string, rule, "catch-up", "SCAPE: catch-up | reference");

namespace corescape::scape_tool {

absl::Status SetRunShapeFromFlags(DriverConfig& config) {
  config.data = absl::GetFlag(FLAGS_data);
  config.model = absl::GetFlag(FLAGS_model);
  config.ranks = absl::GetFlag(FLAGS_ranks);
  config.seq_len = absl::GetFlag(FLAGS_seq_len);
  config.micro_batch = absl::GetFlag(FLAGS_micro_batch);
  auto rule = optim::ParseScapeRule(absl::GetFlag(FLAGS_rule));
  if (!rule.ok()) return absl::InvalidArgumentError(absl::StrCat("--rule: ", rule.status().message()));
  config.scape.rule = *rule;
  return absl::OkStatus();
}

}  // namespace corescape::scape_tool
