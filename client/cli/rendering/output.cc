#include "client/cli/rendering/output.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/rendering/table.h"
#include "runtime/job/job_device.h"

namespace corescape::cli {

namespace v1 = ::corescape::v1;

std::string FormatIso8601Millis(int64_t unix_ms) {
  if (unix_ms == 0) return "";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

std::string FormatShortDuration(absl::Duration duration) {
  if (duration < absl::ZeroDuration()) duration = -duration;
  const int64_t ms = absl::ToInt64Milliseconds(duration);
  if (ms < 1000) return absl::StrCat(ms, "ms");
  if (ms < 60 * 1000) {
    // "10s" for whole seconds (a lease TTL), "1.2s" otherwise (an age).
    // Truncated, not rounded, so 59.99s never shows as "60.0s".
    if (ms % 1000 == 0) return absl::StrCat(ms / 1000, "s");
    return absl::StrFormat("%d.%ds", ms / 1000, (ms % 1000) / 100);
  }
  const int64_t seconds = ms / 1000;
  if (seconds < 3600) {
    return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  }
  if (seconds < 86400) {
    return absl::StrFormat("%dh%02dm", seconds / 3600, (seconds % 3600) / 60);
  }
  return absl::StrFormat("%dd%02dh", seconds / 86400, (seconds % 86400) / 3600);
}

std::string FormatAge(int64_t unix_ms, int64_t now_unix_ms) {
  if (unix_ms == 0) return "never";
  const absl::Duration age = absl::Milliseconds(now_unix_ms - unix_ms);
  if (age < absl::ZeroDuration()) {
    return absl::StrCat("in ", FormatShortDuration(age));
  }
  return absl::StrCat(FormatShortDuration(age), " ago");
}

std::string NodeRoleName(v1::NodeRole role) { return v1::NodeRole_Name(role); }

std::string NodeStateName(v1::NodeState state) {
  return v1::NodeState_Name(state);
}

void AddTime(nlohmann::json& object, const std::string& name, int64_t unix_ms) {
  object[name] = FormatIso8601Millis(unix_ms);
  object[name + "_unix_ms"] = unix_ms;
}

std::string EventKindName(v1::ClusterEvent::Kind kind) {
  return v1::ClusterEvent::Kind_Name(kind);
}

std::string NodeDeviceText(const v1::NodeInfo& node) {
  // Attention servers train nothing: no device to show.
  return node.role() == v1::WORKER ? job::DescribeServedDevice(node.resources().device()) : "-";
}

nlohmann::json ServedDeviceToJson(const v1::ServedDevice& device) {
  const v1::Device kind = job::ServedDeviceKind(device);
  nlohmann::json json = {{"kind", job::DeviceKindName(kind)}};
  if (kind == v1::CUDA) {
    json["cuda_index"] = device.cuda_index();
    json["gpu_model"] = device.gpu_model();
    json["gpu_memory_bytes"] = device.gpu_memory_bytes();
  }
  return json;
}

nlohmann::json NodeToJson(const v1::NodeInfo& node) {
  nlohmann::json gpu_names = nlohmann::json::array();
  for (const auto& name : node.resources().gpu_names())
    gpu_names.push_back(name);
  nlohmann::json json = {
      {"name", node.name()},
      {"node_id", node.node_id()},
      {"role", NodeRoleName(node.role())},
      {"state", NodeStateName(node.state())},
      {"incarnation", node.incarnation()},
      {"host", node.host()},
      {"pid", node.pid()},
      {"grpc_address", node.grpc_address()},
      {"data_address", node.data_address()},
      {"version", node.version()},
      {"resources",
       {{"cpu_cores", node.resources().cpu_cores()},
        {"memory_bytes", node.resources().memory_bytes()},
        {"gpus", node.resources().gpus()},
        {"gpu_names", gpu_names},
        {"device", ServedDeviceToJson(node.resources().device())},
        {"checkpoint_root", node.resources().checkpoint_root()},
        {"data_root", node.resources().data_root()}}},
      {"device", NodeDeviceText(node)},
      {"current_job_id", node.current_job_id()},
  };
  AddTime(json, "registered", node.registered_unix_ms());
  AddTime(json, "last_heartbeat", node.last_heartbeat_unix_ms());
  AddTime(json, "lease_expires", node.lease_expires_unix_ms());
  return json;
}

nlohmann::json NodesToJson(const std::vector<v1::NodeInfo>& nodes) {
  nlohmann::json array = nlohmann::json::array();
  for (const auto& node : nodes) array.push_back(NodeToJson(node));
  return array;
}

nlohmann::json EventToJson(const v1::ClusterEvent& event) {
  return {
      {"sequence", event.sequence()},
      {"time", FormatIso8601Millis(event.unix_ms())},
      {"unix_ms", event.unix_ms()},
      {"kind", EventKindName(event.kind())},
      {"node_name", event.node_name()},
      {"job_id", event.job_id()},
      {"message", event.message()},
  };
}

nlohmann::json ClusterStatusToJson(const v1::GetClusterStatusResponse& status,
                                   int64_t now_unix_ms) {
  nlohmann::json events = nlohmann::json::array();
  for (const auto& event : status.recent_events()) {
    events.push_back(EventToJson(event));
  }
  const int64_t uptime_ms = status.started_unix_ms() == 0
                                ? 0
                                : now_unix_ms - status.started_unix_ms();
  nlohmann::json json = {
      {"scheduler_id", status.scheduler_id()},
      {"version", status.version()},
      {"uptime_ms", uptime_ms},
      {"lease_ttl_ms", status.lease_ttl_ms()},
      {"workers_alive", status.workers_alive()},
      {"attention_servers_alive", status.attention_servers_alive()},
      {"nodes_dead", status.nodes_dead()},
      {"nodes_draining", status.nodes_draining()},
      {"jobs_pending", status.jobs_pending()},
      {"jobs_running", status.jobs_running()},
      {"recent_events", events},
  };
  AddTime(json, "started", status.started_unix_ms());
  return json;
}

std::string RenderNodesTable(const std::vector<v1::NodeInfo>& nodes,
                             int64_t now_unix_ms) {
  Table table({"NAME", "ROLE", "STATE", "INCARNATION", "HOST", "PID", "ADDRESS",
               "LAST-HEARTBEAT", "DEVICE"});
  for (const auto& node : nodes) {
    table.AddRow({
        node.name(),
        NodeRoleName(node.role()),
        NodeStateName(node.state()),
        absl::StrCat(node.incarnation()),
        node.host().empty() ? "-" : node.host(),
        node.pid() == 0 ? "-" : absl::StrCat(node.pid()),
        node.grpc_address().empty() ? "-" : node.grpc_address(),
        FormatAge(node.last_heartbeat_unix_ms(), now_unix_ms),
        NodeDeviceText(node),
    });
  }
  return table.Render();
}

std::string RenderEventsTable(const std::vector<v1::ClusterEvent>& events) {
  Table table({"TIME", "KIND", "NODE", "MESSAGE"});
  for (const auto& event : events) {
    std::string node = event.node_name();
    if (node.empty()) node = event.job_id().empty() ? "-" : event.job_id();
    table.AddRow({FormatIso8601Millis(event.unix_ms()),
                  EventKindName(event.kind()), node, event.message()});
  }
  return table.Render();
}

namespace {

std::string Plural(int64_t count, absl::string_view singular,
                   absl::string_view plural) {
  return absl::StrCat(count, " ", count == 1 ? singular : plural);
}

}  // namespace

std::string RenderClusterStatus(const v1::GetClusterStatusResponse& status,
                                int64_t now_unix_ms) {
  Table summary({"", ""});
  summary.AddRow({"Scheduler:",
                  status.scheduler_id().empty() ? "-" : status.scheduler_id()});
  summary.AddRow(
      {"Version:", status.version().empty() ? "-" : status.version()});
  if (status.started_unix_ms() != 0) {
    summary.AddRow(
        {"Uptime:",
         absl::StrCat(
             FormatShortDuration(
                 absl::Milliseconds(now_unix_ms - status.started_unix_ms())),
             " (since ", FormatIso8601Millis(status.started_unix_ms()), ")")});
  } else {
    summary.AddRow({"Uptime:", "-"});
  }
  summary.AddRow({"Lease TTL:", FormatShortDuration(absl::Milliseconds(
                                    status.lease_ttl_ms()))});
  summary.AddRow(
      {"Nodes:",
       absl::StrCat(Plural(status.workers_alive(), "worker", "workers"),
                    " alive, ",
                    Plural(status.attention_servers_alive(), "attention server",
                           "attention servers"),
                    " alive, ", status.nodes_dead(), " dead, ",
                    status.nodes_draining(), " draining")});
  summary.AddRow({"Jobs:", absl::StrCat(status.jobs_pending(), " pending, ",
                                        status.jobs_running(), " running")});
  std::string out = summary.RenderRowsOnly();

  if (status.recent_events().empty()) {
    absl::StrAppend(&out, "\nRecent events: none\n");
  } else {
    std::vector<v1::ClusterEvent> events(status.recent_events().begin(),
                                         status.recent_events().end());
    absl::StrAppend(&out, "\nRecent events:\n", RenderEventsTable(events));
  }
  return out;
}

void SortNodesForDisplay(std::vector<v1::NodeInfo>& nodes) {
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const v1::NodeInfo& a, const v1::NodeInfo& b) {
                     return std::forward_as_tuple(a.role(), a.name()) <
                            std::forward_as_tuple(b.role(), b.name());
                   });
}

}  // namespace corescape::cli
