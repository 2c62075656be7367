// `corescape cluster up`: start a scheduler, then workers and attention
// servers pointed at it, and return once all of them are registered ALIVE.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/cli/commands/cluster.h"
#include "client/cli/common.h"
#include "client/cli/commands/process.h"
#include "client/scheduler_client.h"
#include "runtime/security/certificates.h"
#include "runtime/security/transport_security.h"

namespace corescape::cli {

namespace {

namespace v1 = ::corescape::v1;
namespace fs = std::filesystem;

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
constexpr absl::Duration kTeardownGrace = absl::Seconds(5);
constexpr int kLogTailLines = 20;

// Set by SIGINT/SIGTERM so that an interrupted `cluster up` tears down what
// it started instead of leaving orphans behind.
volatile std::sig_atomic_t interrupted = 0;

void OnInterrupt(int) { interrupted = 1; }

std::string Plural(int count, absl::string_view singular,
                   absl::string_view plural) {
  return absl::StrCat(count, " ", count == 1 ? singular : plural);
}

std::string Absolute(const std::string& path) {
  std::error_code error;
  fs::path absolute = fs::absolute(path, error);
  return error ? path : absolute.lexically_normal().string();
}

// Keeps the cluster file in step with what is running, so that a crash or
// kill of this CLI half-way still leaves `cluster down` able to clean up.
class ClusterLauncher {
 public:
  ClusterLauncher(std::string cluster_file, ClusterRecord record)
      : cluster_file_(std::move(cluster_file)), record_(std::move(record)) {}

  const ClusterRecord& record() const { return record_; }

  absl::StatusOr<pid_t> Start(const std::string& name, const std::string& role,
                              const std::string& binary,
                              const std::vector<std::string>& args) {
    DaemonRecord daemon;
    daemon.name = name;
    daemon.role = role;
    daemon.binary = binary;
    daemon.log = (fs::path(record_.log_dir) / (name + ".log")).string();
    // Logs are appended across runs: mark where this run starts, for people
    // reading the log and for the tail shown if the daemon fails.
    if (absl::Status marked = AppendToFile(
            daemon.log, absl::StrCat("==== ", absl::FormatTime(absl::Now()),
                                     ": corescape cluster up starts ", binary,
                                     " ", absl::StrJoin(args, " "), "\n"));
        !marked.ok()) {
      return marked;
    }
    log_offsets_[name] = FileSize(daemon.log);
    absl::StatusOr<pid_t> pid = SpawnDetached(binary, args, daemon.log);
    if (!pid.ok()) {
      return absl::Status(
          pid.status().code(),
          absl::StrCat("cannot start ", name, ": ", pid.status().message()));
    }
    daemon.pid = *pid;
    // Read now, while the child cannot have exited unnoticed: it stays our
    // (possibly zombie) child until reaped, so the pid is not reused yet.
    daemon.start_ticks = ProcessStartTicks(*pid);
    record_.daemons.push_back(daemon);
    if (absl::Status saved = Save(); !saved.ok()) return saved;
    return *pid;
  }

  // Where this run's output begins in the daemon's log.
  int64_t LogOffset(const std::string& name) const {
    auto it = log_offsets_.find(name);
    return it == log_offsets_.end() ? 0 : it->second;
  }

  absl::Status SetSchedulerAddress(const std::string& address) {
    record_.scheduler_address = address;
    return Save();
  }

  absl::Status SetUrls(const std::string& name, const std::string& metrics_url,
                       const std::string& status_url) {
    for (DaemonRecord& daemon : record_.daemons) {
      if (daemon.name != name) continue;
      daemon.metrics_url = metrics_url;
      daemon.status_url = status_url;
    }
    return Save();
  }

  static absl::Status DaemonExited(const DaemonRecord& daemon,
                                   const std::string& how) {
    return absl::FailedPreconditionError(
        absl::StrCat(daemon.name, " (pid ", daemon.pid, ") ", how,
                     " during startup; see ", daemon.log));
  }

  // Stops everything started so far and forgets the cluster.
  void TearDown() {
    StopClusterDaemons(record_, kTeardownGrace);
    std::error_code ignored;
    fs::remove(cluster_file_, ignored);
  }

 private:
  absl::Status Save() { return WriteClusterFile(cluster_file_, record_); }

  std::string cluster_file_;
  ClusterRecord record_;
  std::map<std::string, int64_t> log_offsets_;
};

void PrintLogTail(const DaemonRecord& daemon, int64_t offset) {
  const std::string tail = TailOfFile(daemon.log, kLogTailLines, offset);
  if (tail.empty()) {
    std::cerr << "(" << daemon.name << " wrote nothing to " << daemon.log << ")"
              << std::endl;
    return;
  }
  std::cerr << "--- last lines of " << daemon.log << " ---\n"
            << tail << "--- end of " << daemon.name << " log ---" << std::endl;
}

// Fails the launch: prints the error (and the failed daemon's log), stops
// what was started and returns the exit code.
int FailLaunch(ClusterLauncher& launcher, const absl::Status& status,
               const DaemonRecord* log_to_show) {
  const int exit_code =
      Fail(kExitFailure, absl::StrCat("cluster up failed: ", status.message()));
  if (log_to_show != nullptr) {
    PrintLogTail(*log_to_show, launcher.LogOffset(log_to_show->name));
  }
  std::cerr << "corescape: stopping the daemons started so far" << std::endl;
  launcher.TearDown();
  return exit_code;
}

const DaemonRecord* FirstExited(const ClusterRecord& record, std::string* how) {
  for (const auto& daemon : record.daemons) {
    std::optional<std::string> exit = ChildExitDescription(daemon.pid);
    if (exit.has_value()) {
      *how = *exit;
      return &daemon;
    }
  }
  return nullptr;
}

// Waits for the scheduler to write its bound address to `port_file`.
absl::StatusOr<std::string> WaitForPortFile(const DaemonRecord& scheduler,
                                            const std::string& port_file,
                                            absl::Time deadline) {
  while (true) {
    absl::StatusOr<std::string> contents = ReadFile(port_file);
    if (contents.ok()) {
      std::string address(absl::StripAsciiWhitespace(*contents));
      if (!address.empty()) {
        if (!IsHostPort(address)) {
          return absl::FailedPreconditionError(
              absl::StrCat("the scheduler wrote '", address, "' to ", port_file,
                           ", which is not HOST:PORT"));
        }
        return address;
      }
    }
    if (std::optional<std::string> exit = ChildExitDescription(scheduler.pid)) {
      return ClusterLauncher::DaemonExited(scheduler, *exit);
    }
    if (interrupted) return absl::CancelledError("interrupted");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the scheduler did not write its address to ", port_file,
                       " in time; see ", scheduler.log));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

// A started node that the scheduler does not (yet) list as ALIVE with the
// pid we started, and what the scheduler says instead.
struct NodeNotAlive {
  const DaemonRecord* daemon;
  std::string why;  // "not registered", "DEAD", ...
};

std::vector<NodeNotAlive> NodesNotAlive(const ClusterRecord& record,
                                        const v1::ListNodesResponse& listing) {
  std::map<std::string, const v1::NodeInfo*> by_name;
  for (const auto& node : listing.nodes()) by_name[node.name()] = &node;
  std::vector<NodeNotAlive> not_alive;
  for (const auto& daemon : record.daemons) {
    if (daemon.role == kSchedulerRole) continue;
    auto it = by_name.find(daemon.name);
    // A record left over from an earlier cluster in the same state dir has
    // another pid; wait for this process's own registration.
    if (it == by_name.end() ||
        (it->second->pid() != 0 && it->second->pid() != daemon.pid)) {
      not_alive.push_back({&daemon, "not registered"});
    } else if (it->second->state() != v1::ALIVE) {
      not_alive.push_back({&daemon, v1::NodeState_Name(it->second->state())});
    }
  }
  return not_alive;
}

std::string Describe(const std::vector<NodeNotAlive>& nodes) {
  return absl::StrJoin(
      nodes, ", ", [](std::string* out, const NodeNotAlive& node) {
        absl::StrAppend(out, node.daemon->name, " (", node.why, ")");
      });
}

// Leaves a stale cluster file's leftovers behind us, or refuses if that
// cluster is still running.
absl::Status ClearPreviousCluster(const std::string& cluster_file) {
  absl::StatusOr<ClusterRecord> previous = ReadClusterFile(cluster_file);
  if (absl::IsNotFound(previous.status())) return absl::OkStatus();
  if (!previous.ok()) {
    Warn(absl::StrCat("replacing unreadable cluster file: ",
                      previous.status().message()));
    return absl::OkStatus();
  }
  const DaemonRecord* scheduler = previous->Scheduler();
  if (scheduler != nullptr && IsDaemonAlive(*scheduler)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a local cluster is already running (scheduler ",
        previous->scheduler_address.empty() ? "starting"
                                            : previous->scheduler_address,
        ", pid ", scheduler->pid, "; ", cluster_file,
        "); stop it first with `corescape cluster down`"));
  }
  // The scheduler is gone; nodes still running would only retry a dead
  // address forever.
  std::vector<StopOutcome> stopped =
      StopClusterDaemons(*previous, kTeardownGrace);
  int leftovers = 0;
  for (const auto& outcome : stopped) {
    if (outcome.result != StopOutcome::kNotRunning) ++leftovers;
  }
  if (leftovers > 0) {
    Warn(absl::StrCat("stopped ", leftovers,
                      " leftover daemon(s) of a previous cluster whose "
                      "scheduler had exited"));
  }
  return absl::OkStatus();
}

// The HOST:PORT a daemon wrote to `path` (its --metrics_port_file or
// --http_port_file, written before the daemon serves gRPC).
absl::StatusOr<std::string> ReadAddressFile(const std::string& path,
                                            const std::string& what) {
  absl::StatusOr<std::string> contents = ReadFile(path);
  if (!contents.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no ", what, " address in ", path, ": ",
                     contents.status().message()));
  }
  std::string address(absl::StripAsciiWhitespace(*contents));
  if (!IsHostPort(address)) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " holds '", address, "', which is not HOST:PORT"));
  }
  return address;
}

std::string MetricsPortFile(const fs::path& state_dir,
                            const std::string& name) {
  return (state_dir / (name + ".metrics.addr")).string();
}

// Every daemon serves its metrics on a free loopback port.
std::vector<std::string> MetricsFlags(const fs::path& state_dir,
                                      const std::string& name) {
  return {"--metrics_listen=127.0.0.1:0",
          absl::StrCat("--metrics_port_file=", MetricsPortFile(state_dir, name))};
}

std::string MetricsUrl(const std::string& address) {
  return absl::StrCat("http://", address, "/metrics");
}

struct DaemonBinaries {
  std::string scheduler;
  std::string worker;            // empty when no workers are wanted
  std::string attention_server;  // empty when no attention servers are wanted
};

absl::StatusOr<DaemonBinaries> FindDaemonBinaries(
    const ClusterUpOptions& options) {
  DaemonBinaries binaries;
  absl::StatusOr<std::string> found =
      FindDaemonBinary("corescape-scheduler", "scheduler", options.bin_dir);
  if (!found.ok()) return found.status();
  binaries.scheduler = *found;
  if (options.workers > 0) {
    found = FindDaemonBinary("corescape-worker", "worker", options.bin_dir);
    if (!found.ok()) return found.status();
    binaries.worker = *found;
  }
  if (options.attention_servers > 0) {
    found = FindDaemonBinary("corescape-attention-server", "attention_server",
                             options.bin_dir);
    if (!found.ok()) return found.status();
    binaries.attention_server = *found;
  }
  return binaries;
}

}  // namespace

absl::StatusOr<std::vector<device::Device>> WorkerDevices(
    const std::vector<std::string>& devices, int workers) {
  if (devices.empty()) return std::vector<device::Device>(workers, device::Device::Cpu());
  if (static_cast<int>(devices.size()) != workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker-devices: ", devices.size(), " devices for ", workers,
        " workers (give one per worker, in worker order)"));
  }
  std::vector<device::Device> parsed;
  std::map<int, int> worker_of_gpu;
  for (int i = 0; i < workers; ++i) {
    absl::StatusOr<device::Device> one = device::ParseDevice(devices[i]);
    if (!one.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--worker-devices: worker-", i, ": ", one.status().message()));
    }
    if (one->is_cuda()) {
      auto [it, fresh] = worker_of_gpu.emplace(one->index, i);
      if (!fresh) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--worker-devices: ", one->ToString(), " is given to worker-", it->second,
            " and worker-", i, " (one worker daemon per GPU)"));
      }
    }
    parsed.push_back(*one);
  }
  return parsed;
}

int RunClusterUp(const ClusterUpOptions& options) {
  absl::StatusOr<std::vector<device::Device>> worker_devices =
      WorkerDevices(options.worker_devices, options.workers);
  if (!worker_devices.ok()) return Fail(kExitUsage, worker_devices.status().message());
  absl::StatusOr<std::string> home = CorescapeHome();
  if (!home.ok()) return Fail(kExitFailure, home.status().message());
  const std::string home_dir = Absolute(*home);
  if (absl::Status made = MakeDirectories(home_dir); !made.ok()) {
    return Fail(kExitFailure, made.message());
  }
  if (absl::Status locked = LockClusterHome(home_dir); !locked.ok()) {
    return Fail(kExitFailure, locked.message());
  }
  const std::string cluster_file = ClusterFilePath(home_dir);
  if (absl::Status cleared = ClearPreviousCluster(cluster_file);
      !cleared.ok()) {
    return Fail(kExitFailure, cleared.message());
  }

  // Find every binary before starting anything.
  absl::StatusOr<DaemonBinaries> binaries = FindDaemonBinaries(options);
  if (!binaries.ok()) return Fail(kExitFailure, binaries.status().message());

  ClusterRecord record;
  record.state_dir = Absolute(options.state_dir.empty()
                                  ? (fs::path(home_dir) / "cluster").string()
                                  : options.state_dir);
  record.log_dir = (fs::path(record.state_dir) / "logs").string();
  record.started_unix_ms = absl::ToUnixMillis(absl::Now());
  record.lease_ttl_seconds = options.lease_ttl_seconds;
  const fs::path state_dir(record.state_dir);
  if (!options.insecure) record.tls_dir = (state_dir / "tls").string();
  for (const std::string& dir :
       {record.log_dir, (state_dir / "scheduler").string()}) {
    if (absl::Status made = MakeDirectories(dir); !made.ok()) {
      return Fail(kExitFailure, made.message());
    }
  }

  std::vector<std::string> node_names;
  for (int i = 0; i < options.workers; ++i) {
    node_names.push_back(absl::StrCat("worker-", i));
  }
  for (int i = 0; i < options.attention_servers; ++i) {
    node_names.push_back(absl::StrCat("attn-", i));
  }
  // Port files from an earlier run would be mistaken for fresh ones.
  const std::string scheduler_port_file =
      (state_dir / "scheduler.addr").string();
  std::error_code ignored;
  const std::string status_page_port_file =
      (state_dir / "scheduler.http.addr").string();
  fs::remove(scheduler_port_file, ignored);
  fs::remove(status_page_port_file, ignored);
  fs::remove(MetricsPortFile(state_dir, "scheduler"), ignored);
  for (const auto& name : node_names) {
    fs::remove(state_dir / (name + ".addr"), ignored);
    fs::remove(MetricsPortFile(state_dir, name), ignored);
  }

  // Certificates for the scheduler, every node and the CLI, before any daemon.
  std::string security_flag = "--insecure";
  security::TransportSecurity cli_security = security::TransportSecurity::Insecure();
  if (!options.insecure) {
    security::CertificateDirectoryOptions certificates;
    certificates.directory = record.tls_dir;
    certificates.nodes = node_names;
    if (auto made = security::InitCertificateDirectory(certificates); !made.ok()) {
      return Fail(kExitFailure, absl::StrCat("certificates: ", made.status().message()));
    }
    auto loaded = security::TransportSecurity::FromTlsDir(record.tls_dir, "operator");
    if (!loaded.ok()) return Fail(kExitFailure, loaded.status().message());
    cli_security = *std::move(loaded);
    security_flag = absl::StrCat("--tls_dir=", record.tls_dir);
  }

  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  const absl::Time deadline =
      absl::Now() + absl::Seconds(options.timeout_seconds);
  ClusterLauncher launcher(cluster_file, record);

  // 1. The scheduler, and the address it bound.
  std::vector<std::string> scheduler_args = {
      "--listen=127.0.0.1:0",
      absl::StrCat("--port_file=", scheduler_port_file),
      absl::StrCat("--state_dir=", (state_dir / "scheduler").string()),
      absl::StrCat("--lease_ttl=", absl::FormatDuration(absl::Seconds(
                                       options.lease_ttl_seconds))),
      "--http_listen=127.0.0.1:0",
      absl::StrCat("--http_port_file=", status_page_port_file), security_flag};
  for (std::string& flag : MetricsFlags(state_dir, "scheduler")) {
    scheduler_args.push_back(std::move(flag));
  }
  absl::StatusOr<pid_t> scheduler_pid = launcher.Start(
      "scheduler", kSchedulerRole, binaries->scheduler, scheduler_args);
  if (!scheduler_pid.ok())
    return FailLaunch(launcher, scheduler_pid.status(), nullptr);
  const DaemonRecord scheduler = launcher.record().daemons.back();
  absl::StatusOr<std::string> address =
      WaitForPortFile(scheduler, scheduler_port_file, deadline);
  if (!address.ok()) return FailLaunch(launcher, address.status(), &scheduler);
  if (absl::Status saved = launcher.SetSchedulerAddress(*address);
      !saved.ok()) {
    return FailLaunch(launcher, saved, nullptr);
  }
  // Both are written before the scheduler's port file.
  absl::StatusOr<std::string> status_page =
      ReadAddressFile(status_page_port_file, "status page");
  if (!status_page.ok()) {
    return FailLaunch(launcher, status_page.status(), &scheduler);
  }
  absl::StatusOr<std::string> scheduler_metrics = ReadAddressFile(
      MetricsPortFile(state_dir, "scheduler"), "scheduler metrics");
  if (!scheduler_metrics.ok()) {
    return FailLaunch(launcher, scheduler_metrics.status(), &scheduler);
  }
  const std::string status_url = absl::StrCat("http://", *status_page, "/");
  if (absl::Status saved = launcher.SetUrls(
          "scheduler", MetricsUrl(*scheduler_metrics), status_url);
      !saved.ok()) {
    return FailLaunch(launcher, saved, nullptr);
  }

  // 2. The nodes.
  // Each root: as given, or the directory `up` runs in.
  const auto root_or_here = [](const std::string& root) {
    std::error_code cwd_error;
    return fs::absolute(root.empty() ? fs::current_path(cwd_error) : fs::path(root), cwd_error)
        .lexically_normal()
        .string();
  };
  const std::string checkpoint_root = root_or_here(options.checkpoint_root);
  const std::string data_root = root_or_here(options.data_root);
  for (size_t node = 0; node < node_names.size(); ++node) {
    const std::string& name = node_names[node];
    const bool is_worker = node < worker_devices->size();
    std::vector<std::string> args = {
        absl::StrCat("--scheduler=", *address), absl::StrCat("--name=", name),
        "--listen=127.0.0.1:0", "--advertise_host=127.0.0.1",
        absl::StrCat("--port_file=", (state_dir / (name + ".addr")).string()), security_flag};
    for (std::string& flag : MetricsFlags(state_dir, name)) {
      args.push_back(std::move(flag));
    }
    if (is_worker) {
      args.push_back(absl::StrCat("--checkpoint_root=", checkpoint_root));
      args.push_back(absl::StrCat("--data_root=", data_root));
      args.push_back(absl::StrCat("--device=", (*worker_devices)[node].ToString()));
    }
    absl::StatusOr<pid_t> pid = launcher.Start(
        name, is_worker ? kWorkerRole : kAttentionServerRole,
        is_worker ? binaries->worker : binaries->attention_server, args);
    if (!pid.ok()) return FailLaunch(launcher, pid.status(), nullptr);
  }

  // 3. Wait until the scheduler lists every node ALIVE.
  client::SchedulerClient scheduler_client(*address, cli_security, absl::Seconds(1));
  std::vector<NodeNotAlive> not_alive;
  absl::Status last_rpc_error = absl::UnavailableError("no answer yet");
  while (true) {
    std::string how;
    if (const DaemonRecord* exited = FirstExited(launcher.record(), &how)) {
      return FailLaunch(launcher, ClusterLauncher::DaemonExited(*exited, how),
                        exited);
    }
    absl::StatusOr<v1::ListNodesResponse> listing =
        scheduler_client.ListNodes();
    if (listing.ok()) {
      not_alive = NodesNotAlive(launcher.record(), *listing);
      if (not_alive.empty()) break;
    } else {
      last_rpc_error = listing.status();
    }
    if (interrupted) {
      return FailLaunch(launcher, absl::CancelledError("interrupted"), nullptr);
    }
    if (absl::Now() >= deadline) {
      std::string why = absl::StrCat(
          "timed out after ",
          absl::FormatDuration(absl::Seconds(options.timeout_seconds)),
          " waiting for nodes to become ALIVE");
      if (listing.ok()) {
        absl::StrAppend(&why, ": ", Describe(not_alive));
      } else {
        absl::StrAppend(&why, "; the scheduler at ", *address,
                        " did not answer ListNodes (",
                        last_rpc_error.ToString(), ")");
      }
      return FailLaunch(launcher, absl::DeadlineExceededError(why),
                        listing.ok() ? not_alive.front().daemon : &scheduler);
    }
    absl::SleepFor(kPollInterval);
  }
  // A node writes its metrics address before it registers.
  for (const auto& name : node_names) {
    const DaemonRecord* node = nullptr;
    for (const auto& daemon : launcher.record().daemons) {
      if (daemon.name == name) node = &daemon;
    }
    absl::StatusOr<std::string> metrics = ReadAddressFile(
        MetricsPortFile(state_dir, name), absl::StrCat(name, " metrics"));
    if (!metrics.ok()) return FailLaunch(launcher, metrics.status(), node);
    if (absl::Status saved = launcher.SetUrls(name, MetricsUrl(*metrics), "");
        !saved.ok()) {
      return FailLaunch(launcher, saved, nullptr);
    }
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);

  if (options.json) {
    PrintJson(ClusterRecordToJson(launcher.record()));
  } else {
    std::cout << "cluster up: scheduler " << *address << ", "
              << Plural(options.workers, "worker", "workers") << ", "
              << Plural(options.attention_servers, "attention server",
                        "attention servers")
              << " (state in " << record.state_dir << ")\n"
              << (options.insecure ? std::string("plaintext (--insecure): no TLS, no authentication")
                                   : absl::StrCat("mutual TLS: certificates in ", record.tls_dir,
                                                  " (the CLI finds them)"))
              << "\n";
    std::vector<std::string> on_gpus;
    for (size_t i = 0; i < worker_devices->size(); ++i) {
      if ((*worker_devices)[i].is_cuda()) {
        on_gpus.push_back(absl::StrCat("worker-", i, " on ", (*worker_devices)[i].ToString()));
      }
    }
    if (!on_gpus.empty()) std::cout << "GPUs: " << absl::StrJoin(on_gpus, ", ") << "\n";
    std::cout << "status page " << status_url << "\n"
              << *address << std::endl;
  }
  return kExitOk;
}

}  // namespace corescape::cli
