// The local cluster file, <home>/cluster.json: written by `cluster up`, read
// by `cluster down` and by every command that needs a scheduler address.
//
//   {
//     "scheduler": "127.0.0.1:PORT",
//     "state_dir": "/abs/state", "log_dir": "/abs/state/logs",
//     "started_unix_ms": 1700000000000, "lease_ttl_seconds": 10,
//     "tls_dir": "/abs/state/tls",   (empty: the cluster runs --insecure)
//     "daemons": [{"name": "scheduler", "role": "scheduler", "pid": 123,
//                  "start_ticks": 4567, "binary": "/abs/corescape-scheduler",
//                  "log": "/abs/state/logs/scheduler.log",
//                  "metrics_url": "http://127.0.0.1:PORT/metrics",
//                  "status_url": "http://127.0.0.1:PORT/"}, ...]
//   (status_url: the scheduler's status page, on the scheduler only)
//   }
#ifndef CORESCAPE_CLIENT_CLI_COMMANDS_CLUSTER_FILE_H_
#define CORESCAPE_CLIENT_CLI_COMMANDS_CLUSTER_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {

inline constexpr char kSchedulerRole[] = "scheduler";
inline constexpr char kWorkerRole[] = "worker";
inline constexpr char kAttentionServerRole[] = "attention-server";

struct DaemonRecord {
  std::string name;
  std::string role;  // kSchedulerRole, kWorkerRole or kAttentionServerRole
  int64_t pid = 0;
  uint64_t start_ticks = 0;  // tells the daemon apart from a reused pid
  std::string binary;
  std::string log;
  std::string metrics_url;  // its Prometheus endpoint; empty if unknown
  std::string status_url;   // the scheduler's status page; empty otherwise
};

// True while the recorded process (same pid, same start time) runs.
bool IsDaemonAlive(const DaemonRecord& daemon);

struct ClusterRecord {
  std::string scheduler_address;  // empty until the scheduler has bound
  std::string state_dir;
  std::string log_dir;
  int64_t started_unix_ms = 0;
  double lease_ttl_seconds = 0;
  // The certificates `cluster up` made (ca.crt, operator.crt, ...); empty
  // when the cluster runs in plaintext.
  std::string tls_dir;
  std::vector<DaemonRecord> daemons;

  // The scheduler's record, or nullptr.
  const DaemonRecord* Scheduler() const;
};

// $CORESCAPE_HOME, else $HOME/.corescape.
absl::StatusOr<std::string> CorescapeHome();

std::string ClusterFilePath(const std::string& home);

nlohmann::json ClusterRecordToJson(const ClusterRecord& record);
absl::StatusOr<ClusterRecord> ClusterRecordFromJson(const nlohmann::json& json);

// NOT_FOUND if the file does not exist; INVALID_ARGUMENT if it is not a
// cluster file.
absl::StatusOr<ClusterRecord> ReadClusterFile(const std::string& path);
absl::Status WriteClusterFile(const std::string& path,
                              const ClusterRecord& record);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_COMMANDS_CLUSTER_FILE_H_
