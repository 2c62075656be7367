// `corescape cluster ...`: registration of the subcommands, plus `down` and
// `status`, which only need the cluster file.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands/cluster.h"
#include "client/cli/common.h"
#include "client/cli/commands/process.h"
#include "client/cli/rendering/table.h"

namespace corescape::cli {

namespace fs = std::filesystem;

std::vector<std::string> DaemonBinaryCandidates(
    const std::string& binary_name, const std::string& package,
    const std::string& bin_dir_flag) {
  std::vector<std::string> candidates;
  if (!bin_dir_flag.empty()) {
    candidates.push_back((fs::path(bin_dir_flag) / binary_name).string());
  }
  if (const char* env = std::getenv("CORESCAPE_BIN_DIR");
      env != nullptr && *env != '\0') {
    candidates.push_back((fs::path(env) / binary_name).string());
  }
  if (absl::StatusOr<std::string> exe_dir = ExecutableDirectory();
      exe_dir.ok()) {
    candidates.push_back((fs::path(*exe_dir) / binary_name).string());
    candidates.push_back(
        (fs::path(*exe_dir).parent_path() / package / binary_name).string());
  }
  return candidates;
}

absl::StatusOr<std::string> FindDaemonBinary(const std::string& binary_name,
                                             const std::string& package,
                                             const std::string& bin_dir_flag) {
  std::vector<std::string> candidates =
      DaemonBinaryCandidates(binary_name, package, bin_dir_flag);
  for (const auto& candidate : candidates) {
    if (IsExecutableFile(candidate)) {
      std::error_code error;
      fs::path absolute = fs::absolute(candidate, error);
      return error ? candidate : absolute.lexically_normal().string();
    }
  }
  return absl::NotFoundError(
      absl::StrCat("cannot find ", binary_name, " (looked at ",
                   absl::StrJoin(candidates, ", "),
                   "); pass --bin-dir or set CORESCAPE_BIN_DIR"));
}

std::vector<StopOutcome> StopClusterDaemons(const ClusterRecord& record,
                                            absl::Duration grace) {
  std::vector<StopOutcome> outcomes;
  auto stop_group = [&](bool schedulers) {
    std::vector<DaemonRecord> group;
    std::vector<DaemonProcess> running;
    for (const auto& daemon : record.daemons) {
      if ((daemon.role == kSchedulerRole) != schedulers) continue;
      if (IsDaemonAlive(daemon)) {
        group.push_back(daemon);
        running.push_back({static_cast<pid_t>(daemon.pid), daemon.start_ticks});
      } else {
        outcomes.push_back({daemon, StopOutcome::kNotRunning});
      }
    }
    std::vector<pid_t> killed = TerminateDaemons(running, grace);
    for (const auto& daemon : group) {
      const bool was_killed =
          std::find(killed.begin(), killed.end(), daemon.pid) != killed.end();
      outcomes.push_back(
          {daemon, was_killed ? StopOutcome::kKilled : StopOutcome::kStopped});
    }
  };
  stop_group(/*schedulers=*/false);
  stop_group(/*schedulers=*/true);
  return outcomes;
}

absl::Status LockClusterHome(const std::string& home) {
  const std::string path = (fs::path(home) / "cluster.lock").string();
  // Deliberately never closed: the lock lives as long as this process.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "another `corescape cluster` command is running on ", home));
  }
  return absl::OkStatus();
}

namespace {

int NoClusterRunning(const std::string& cluster_file, bool json) {
  if (json) {
    PrintJson({{"running", false}, {"cluster_file", cluster_file}});
  } else {
    std::cout << "no local cluster running (no " << cluster_file << ")"
              << std::endl;
  }
  return kExitOk;
}

}  // namespace

int RunClusterDown(const ClusterDownOptions& options) {
  absl::StatusOr<std::string> home = CorescapeHome();
  if (!home.ok()) return Fail(kExitFailure, home.status().message());
  const std::string cluster_file = ClusterFilePath(*home);
  std::error_code ignored;
  if (!fs::exists(cluster_file, ignored)) {
    return NoClusterRunning(cluster_file, options.json);
  }
  if (absl::Status locked = LockClusterHome(*home); !locked.ok()) {
    return Fail(kExitFailure, locked.message());
  }
  absl::StatusOr<ClusterRecord> record = ReadClusterFile(cluster_file);
  if (absl::IsNotFound(record.status())) {
    return NoClusterRunning(cluster_file, options.json);
  }
  if (!record.ok()) {
    return Fail(kExitFailure,
                absl::StrCat(record.status().message(),
                             "; stop its daemons by hand and remove the file"));
  }

  std::vector<StopOutcome> outcomes =
      StopClusterDaemons(*record, absl::Seconds(options.timeout_seconds));
  fs::remove(cluster_file, ignored);

  int stopped = 0;
  nlohmann::json daemons = nlohmann::json::array();
  for (const auto& outcome : outcomes) {
    const DaemonRecord& daemon = outcome.daemon;
    std::string result;
    switch (outcome.result) {
      case StopOutcome::kStopped:
        result = "stopped";
        ++stopped;
        if (!options.json) {
          std::cout << "stopped " << daemon.name << " (pid " << daemon.pid
                    << ")\n";
        }
        break;
      case StopOutcome::kKilled:
        result = "killed";
        ++stopped;
        if (!options.json) {
          std::cout << "killed " << daemon.name << " (pid " << daemon.pid
                    << ") after it ignored SIGTERM for "
                    << absl::FormatDuration(
                           absl::Seconds(options.timeout_seconds))
                    << "\n";
        }
        break;
      case StopOutcome::kNotRunning:
        result = "not_running";
        if (!options.json) {
          std::cout << daemon.name << " (pid " << daemon.pid
                    << ") was not running\n";
        }
        break;
    }
    daemons.push_back({{"name", daemon.name},
                       {"role", daemon.role},
                       {"pid", daemon.pid},
                       {"result", result}});
  }
  if (options.json) {
    PrintJson({{"scheduler", record->scheduler_address},
               {"state_dir", record->state_dir},
               {"daemons", daemons}});
  } else {
    std::cout << "cluster down: stopped " << stopped << " of "
              << record->daemons.size() << " daemons (state kept in "
              << record->state_dir << ")" << std::endl;
  }
  return kExitOk;
}

int RunClusterStatus(bool json) {
  absl::StatusOr<std::string> home = CorescapeHome();
  if (!home.ok()) return Fail(kExitFailure, home.status().message());
  const std::string cluster_file = ClusterFilePath(*home);
  absl::StatusOr<ClusterRecord> record = ReadClusterFile(cluster_file);
  if (absl::IsNotFound(record.status())) {
    return NoClusterRunning(cluster_file, json);
  }
  if (!record.ok()) return Fail(kExitFailure, record.status().message());

  const DaemonRecord* scheduler = record->Scheduler();
  const bool running = scheduler != nullptr && IsDaemonAlive(*scheduler);
  if (json) {
    nlohmann::json out = ClusterRecordToJson(*record);
    out["running"] = running;
    out["cluster_file"] = cluster_file;
    for (size_t i = 0; i < record->daemons.size(); ++i) {
      out["daemons"][i]["running"] = IsDaemonAlive(record->daemons[i]);
    }
    PrintJson(out);
    return kExitOk;
  }
  std::cout << "scheduler " << record->scheduler_address << " ("
            << (running ? "running" : "not running") << "), state in "
            << record->state_dir << "\n";
  if (scheduler != nullptr && !scheduler->status_url.empty()) {
    std::cout << "status page " << scheduler->status_url << "\n";
  }
  Table table({"NAME", "ROLE", "PID", "PROCESS", "METRICS", "LOG"});
  for (const auto& daemon : record->daemons) {
    table.AddRow({daemon.name, daemon.role, absl::StrCat(daemon.pid),
                  IsDaemonAlive(daemon) ? "running" : "exited",
                  daemon.metrics_url, daemon.log});
  }
  std::cout << table.Render();
  std::cout.flush();
  return kExitOk;
}

std::vector<Subcommand> AddClusterCommands(CLI::App& parent) {
  CLI::App* cluster = parent.add_subcommand(
      "cluster", "Run a local cluster on this machine (loopback only)");

  auto up_options = std::make_shared<ClusterUpOptions>();
  CLI::App* up = cluster->add_subcommand(
      "up",
      "Start a scheduler, workers and attention servers in the background; "
      "print the scheduler address on the last line");
  up->add_option("--workers", up_options->workers, "Number of workers (0-256)")
      ->type_name("N")
      ->check(Silent(CLI::Range(0, 256)))
      ->capture_default_str();
  up->add_option("--attention-servers", up_options->attention_servers,
                 "Number of attention servers (0-256)")
      ->type_name("M")
      ->check(Silent(CLI::Range(0, 256)))
      ->capture_default_str();
  up->add_option("--state-dir", up_options->state_dir,
                 "Directory for daemon state and logs (default: "
                 "$CORESCAPE_HOME/cluster, CORESCAPE_HOME defaults to "
                 "~/.corescape)")
      ->type_name("DIR");
  up->add_option("--lease-ttl", up_options->lease_ttl_seconds, "Node lease TTL")
      ->type_name("SECONDS")
      ->check(PositiveSeconds())
      ->capture_default_str();
  up->add_option("--timeout", up_options->timeout_seconds,
                 "How long to wait for every node to be ALIVE")
      ->type_name("SECONDS")
      ->check(PositiveSeconds())
      ->capture_default_str();
  up->add_option("--bin-dir", up_options->bin_dir,
                 "Directory holding corescape-scheduler, corescape-worker and "
                 "corescape-attention-server (default: $CORESCAPE_BIN_DIR, "
                 "then next to this executable)")
      ->type_name("DIR");
  up->add_option("--checkpoint-root", up_options->checkpoint_root,
                 "The only directory tree the workers keep checkpoints in "
                 "(default: the current directory)")
      ->type_name("DIR");
  up->add_option("--data-root", up_options->data_root,
                 "The only directory tree the workers read datasets from "
                 "(default: the current directory)")
      ->type_name("DIR");
  up->add_option("--worker-devices", up_options->worker_devices,
                 "What each worker serves, one per worker in order, comma-separated: cpu "
                 "(the default for all) or cuda:N (GPU N of this machine, one worker per GPU)")
      ->type_name("LIST")
      ->delimiter(',');
  up->add_flag("--json", up_options->json,
               "Print the cluster (scheduler address, daemons) as JSON");
  up->add_flag("--insecure", up_options->insecure,
               "Run the daemons in plaintext instead of making certificates in "
               "<state dir>/tls and using mutual TLS");

  auto down_options = std::make_shared<ClusterDownOptions>();
  CLI::App* down = cluster->add_subcommand(
      "down", "Stop the local cluster (nodes first, scheduler last)");
  down->add_option("--timeout", down_options->timeout_seconds,
                   "How long each group of daemons (nodes, then the "
                   "scheduler) gets after SIGTERM before SIGKILL")
      ->type_name("SECONDS")
      ->check(PositiveSeconds())
      ->capture_default_str();
  down->add_flag("--json", down_options->json,
                 "Print what was stopped as JSON");

  auto status_json = std::make_shared<bool>(false);
  CLI::App* status = cluster->add_subcommand(
      "status", "Show the local cluster's daemons and whether they run");
  status->add_flag("--json", *status_json, "Print as JSON");

  return {
      {up, [up_options]() { return RunClusterUp(*up_options); }},
      {down, [down_options]() { return RunClusterDown(*down_options); }},
      {status, [status_json]() { return RunClusterStatus(*status_json); }},
  };
}

}  // namespace corescape::cli
