#ifndef CORESCAPE_TOOLS_SCAPE_RANK_REPORT_H_
#define CORESCAPE_TOOLS_SCAPE_RANK_REPORT_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "tools/scape/training_rank.h"

namespace corescape::scape_tool {

// A rank's outcome as JSON: checksums as 8-digit hex strings, per-step
// traces (loss also as the hex of its 64 bits, so equality checks are
// exact), timings, bytes.
nlohmann::json RankOutcomeToJson(const RankOutcome& outcome);

// The JSON of the configuration a run used (method, model, batch, ...).
nlohmann::json DriverConfigToJson(const DriverConfig& config);

// Writes `j` to `path` atomically (pretty-printed).
absl::Status WriteJsonFile(const std::string& path, const nlohmann::json& j);

}  // namespace corescape::scape_tool

#endif  // CORESCAPE_TOOLS_SCAPE_RANK_REPORT_H_
