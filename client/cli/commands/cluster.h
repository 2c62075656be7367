// The local cluster behind `corescape cluster up|down|status`: one
// scheduler plus workers and attention servers on loopback, started as
// detached processes and remembered in <home>/cluster.json.
#ifndef CORESCAPE_CLIENT_CLI_COMMANDS_CLUSTER_H_
#define CORESCAPE_CLIENT_CLI_COMMANDS_CLUSTER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cli/commands/cluster_file.h"
#include "runtime/device/device.h"

namespace corescape::cli {

struct ClusterUpOptions {
  int workers = 2;
  int attention_servers = 1;
  std::string state_dir;  // empty: <home>/cluster
  std::string bin_dir;    // empty: search $CORESCAPE_BIN_DIR, then next to us
  // The workers' --checkpoint_root; empty: the directory `cluster up` runs
  // in (where `submit` resolves a relative checkpoint directory from).
  std::string checkpoint_root;
  // The workers' --data_root; empty: the directory `cluster up` runs in
  // (where `submit` resolves a relative dataset path from).
  std::string data_root;
  double lease_ttl_seconds = 10;
  double timeout_seconds = 60;
  bool json = false;
  // Plaintext daemons; by default `up` makes certificates in
  // <state dir>/tls and runs everything with mutual TLS.
  bool insecure = false;
  // Each worker's --device, in worker order (WorkerDevices); empty: cpu.
  std::vector<std::string> worker_devices;
};

// The device each of `workers` workers serves: every one the CPU when
// `devices` is empty, else one entry per worker as --device spells it (cpu,
// cuda, cuda:N). INVALID_ARGUMENT, naming --worker-devices, for a count
// other than `workers`, a device that does not parse, or one GPU given to
// two workers (one worker daemon per GPU).
absl::StatusOr<std::vector<device::Device>> WorkerDevices(
    const std::vector<std::string>& devices, int workers);

struct ClusterDownOptions {
  double timeout_seconds = 10;
  bool json = false;
};

int RunClusterUp(const ClusterUpOptions& options);
int RunClusterDown(const ClusterDownOptions& options);
int RunClusterStatus(bool json);

// Where a daemon binary is looked for, in order: `bin_dir_flag`,
// $CORESCAPE_BIN_DIR, the CLI's own directory, then the Bazel output layout
// (<cli dir>/../<package>/<binary>). The first executable file wins.
std::vector<std::string> DaemonBinaryCandidates(
    const std::string& binary_name, const std::string& package,
    const std::string& bin_dir_flag);
absl::StatusOr<std::string> FindDaemonBinary(const std::string& binary_name,
                                             const std::string& package,
                                             const std::string& bin_dir_flag);

// What happened to one daemon on shutdown.
struct StopOutcome {
  DaemonRecord daemon;
  enum Result { kStopped, kKilled, kNotRunning } result;
};

// Stops workers and attention servers first (so they can deregister while
// the scheduler still listens), then the scheduler. Each group gets `grace`
// after SIGTERM before SIGKILL.
std::vector<StopOutcome> StopClusterDaemons(const ClusterRecord& record,
                                            absl::Duration grace);

// An exclusive, non-blocking lock on <home>/cluster.lock so that two
// `cluster up`/`down` runs cannot interleave. Released when the process
// exits. FAILED_PRECONDITION if another run holds it.
absl::Status LockClusterHome(const std::string& home);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_COMMANDS_CLUSTER_H_
