#include "client/cli/commands/cluster_file.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "client/cli/commands/process.h"

namespace corescape::cli {

const DaemonRecord* ClusterRecord::Scheduler() const {
  for (const auto& daemon : daemons) {
    if (daemon.role == kSchedulerRole) return &daemon;
  }
  return nullptr;
}

bool IsDaemonAlive(const DaemonRecord& daemon) {
  return IsDaemonRunning(static_cast<pid_t>(daemon.pid), daemon.start_ticks);
}

absl::StatusOr<std::string> CorescapeHome() {
  const char* home = std::getenv("CORESCAPE_HOME");
  if (home != nullptr && *home != '\0') return std::string(home);
  const char* user_home = std::getenv("HOME");
  if (user_home != nullptr && *user_home != '\0') {
    return absl::StrCat(user_home, "/.corescape");
  }
  return absl::FailedPreconditionError(
      "neither CORESCAPE_HOME nor HOME is set; set CORESCAPE_HOME to a "
      "directory for the local cluster's files");
}

std::string ClusterFilePath(const std::string& home) {
  return (std::filesystem::path(home) / "cluster.json").string();
}

nlohmann::json ClusterRecordToJson(const ClusterRecord& record) {
  nlohmann::json daemons = nlohmann::json::array();
  for (const auto& daemon : record.daemons) {
    nlohmann::json entry = {{"name", daemon.name},
                            {"role", daemon.role},
                            {"pid", daemon.pid},
                            {"start_ticks", daemon.start_ticks},
                            {"binary", daemon.binary},
                            {"log", daemon.log},
                            {"metrics_url", daemon.metrics_url}};
    if (daemon.role == kSchedulerRole) entry["status_url"] = daemon.status_url;
    daemons.push_back(std::move(entry));
  }
  return {{"scheduler", record.scheduler_address},
          {"state_dir", record.state_dir},
          {"log_dir", record.log_dir},
          {"started_unix_ms", record.started_unix_ms},
          {"lease_ttl_seconds", record.lease_ttl_seconds},
          {"tls_dir", record.tls_dir},
          {"daemons", daemons}};
}

namespace {

// nlohmann's typed getters throw on a type mismatch; these check first.
std::string StringField(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t IntegerField(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

double NumberField(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : 0;
}

}  // namespace

absl::StatusOr<ClusterRecord> ClusterRecordFromJson(
    const nlohmann::json& json) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError("cluster file is not a JSON object");
  }
  ClusterRecord record;
  record.scheduler_address = StringField(json, "scheduler");
  record.state_dir = StringField(json, "state_dir");
  record.log_dir = StringField(json, "log_dir");
  record.started_unix_ms = IntegerField(json, "started_unix_ms");
  record.lease_ttl_seconds = NumberField(json, "lease_ttl_seconds");
  record.tls_dir = StringField(json, "tls_dir");
  auto daemons = json.find("daemons");
  if (daemons != json.end() && daemons->is_array()) {
    for (const auto& entry : *daemons) {
      if (!entry.is_object()) continue;
      DaemonRecord daemon;
      daemon.name = StringField(entry, "name");
      daemon.role = StringField(entry, "role");
      daemon.pid = IntegerField(entry, "pid");
      daemon.start_ticks = static_cast<uint64_t>(
          std::max<int64_t>(0, IntegerField(entry, "start_ticks")));
      daemon.binary = StringField(entry, "binary");
      daemon.log = StringField(entry, "log");
      daemon.metrics_url = StringField(entry, "metrics_url");
      daemon.status_url = StringField(entry, "status_url");
      record.daemons.push_back(std::move(daemon));
    }
  }
  return record;
}

absl::StatusOr<ClusterRecord> ReadClusterFile(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    return absl::NotFoundError(absl::StrCat("no cluster file at ", path));
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  nlohmann::json json =
      nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not valid JSON"));
  }
  absl::StatusOr<ClusterRecord> record = ClusterRecordFromJson(json);
  if (!record.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", record.status().message()));
  }
  return record;
}

absl::Status WriteClusterFile(const std::string& path,
                              const ClusterRecord& record) {
  return WriteFileAtomically(path, ClusterRecordToJson(record).dump(2) + "\n");
}

}  // namespace corescape::cli
