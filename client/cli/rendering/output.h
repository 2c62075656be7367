// Rendering of scheduler answers for people (tables, ages) and for scripts
// (JSON with the proto enum names). Pure functions of their inputs: the
// current time is a parameter so output is testable.
#ifndef CORESCAPE_CLIENT_CLI_RENDERING_OUTPUT_H_
#define CORESCAPE_CLIENT_CLI_RENDERING_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "corescape/v1/common.pb.h"
#include "corescape/v1/operator.pb.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {

// "2025-01-02T03:04:05.678Z"; "" for 0 (the proto's "never").
std::string FormatIso8601Millis(int64_t unix_ms);

// Sets object[name] to FormatIso8601Millis(unix_ms) and
// object[name + "_unix_ms"] to unix_ms: how the JSON output gives a time.
void AddTime(nlohmann::json& object, const std::string& name, int64_t unix_ms);

// Compact duration for people: "850ms", "1.2s", "3m12s", "2h05m", "3d04h".
std::string FormatShortDuration(absl::Duration duration);

// "1.2s ago" relative to now; "never" for 0; "in 1.2s" for future times
// (clock skew between hosts).
std::string FormatAge(int64_t unix_ms, int64_t now_unix_ms);

std::string NodeRoleName(corescape::v1::NodeRole role);
std::string NodeStateName(corescape::v1::NodeState state);
std::string EventKindName(corescape::v1::ClusterEvent::Kind kind);

// What a worker trains on: "cpu" or "cuda:0 (NVIDIA H200, 139.7 GiB)";
// "-" for attention servers.
std::string NodeDeviceText(const corescape::v1::NodeInfo& node);
// {"kind": "cpu"} or {"kind": "cuda", "cuda_index", "gpu_model",
// "gpu_memory_bytes"}.
nlohmann::json ServedDeviceToJson(const corescape::v1::ServedDevice& device);

nlohmann::json NodeToJson(const corescape::v1::NodeInfo& node);
nlohmann::json NodesToJson(const std::vector<corescape::v1::NodeInfo>& nodes);
nlohmann::json EventToJson(const corescape::v1::ClusterEvent& event);
nlohmann::json ClusterStatusToJson(
    const corescape::v1::GetClusterStatusResponse& status, int64_t now_unix_ms);

// NAME ROLE STATE INCARNATION HOST PID ADDRESS LAST-HEARTBEAT DEVICE
std::string RenderNodesTable(const std::vector<corescape::v1::NodeInfo>& nodes,
                             int64_t now_unix_ms);

// TIME KIND NODE MESSAGE
std::string RenderEventsTable(
    const std::vector<corescape::v1::ClusterEvent>& events);

// Summary lines followed by the recent events table.
std::string RenderClusterStatus(
    const corescape::v1::GetClusterStatusResponse& status, int64_t now_unix_ms);

// Nodes ordered by role, then name, so repeated listings line up.
void SortNodesForDisplay(std::vector<corescape::v1::NodeInfo>& nodes);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_RENDERING_OUTPUT_H_
