// What every subcommand shares: exit codes, the one-line error format, the
// global options and how they turn into a scheduler address.
#ifndef CORESCAPE_CLIENT_CLI_COMMON_H_
#define CORESCAPE_CLIENT_CLI_COMMON_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/scheduler_client.h"
#include "runtime/security/transport_security.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {

// Stable, documented exit codes; scripts branch on them.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,
  kExitUsage = 2,
  kExitUnreachable = 3,
  kExitNotFound = 4,
  kExitInvalidArgument = 5,
};

// Prints "corescape: error: <message>" (one line) on stderr; returns
// exit_code so callers can `return Fail(...)`.
int Fail(int exit_code, absl::string_view message);

// Prints "corescape: warning: <message>" on stderr.
void Warn(absl::string_view message);

// Options accepted before or after any subcommand that talks to the
// scheduler.
struct GlobalOptions {
  std::string scheduler;  // empty: $CORESCAPE_SCHEDULER, then the cluster file
  double rpc_timeout_seconds = 5;
  std::string tls_dir;    // empty: $CORESCAPE_TLS_DIR, then the local cluster's
  std::string identity;   // certificate in tls_dir; empty: operator, else submitter
  bool insecure = false;  // plaintext, no certificate
};

void AddGlobalOptions(CLI::App& app, GlobalOptions& options);

// `validator` without its description, so help reads "--workers N=2"
// rather than "--workers INT:INT in [0 - 256]=2".
CLI::Validator Silent(CLI::Validator validator);

// A duration in seconds: positive, finite and at most a year (CLI11's
// PositiveNumber prints DBL_MAX in its error message).
CLI::Validator PositiveSeconds();

// A scheduler address and where it came from, for error messages.
struct SchedulerTarget {
  std::string address;
  std::string source;  // "--scheduler", "$CORESCAPE_SCHEDULER", "<file>"
  absl::Duration rpc_timeout = client::kDefaultRpcTimeout;
  std::string tls_dir;  // empty: plaintext (--insecure, or a cluster up --insecure)
};

// INVALID_ARGUMENT for a malformed address or both --tls-dir and
// --insecure; FAILED_PRECONDITION when no address, or no TLS directory, is
// configured anywhere; UNAVAILABLE when the address comes from the local
// cluster file but that cluster's scheduler process is gone. The TLS
// directory: --tls-dir, else $CORESCAPE_TLS_DIR, else the local cluster's
// when the address is its scheduler.
absl::StatusOr<SchedulerTarget> ResolveScheduler(const GlobalOptions& options);

// The certificate the CLI presents from `tls_dir`: `identity` if given
// (a file stem: operator, submitter, ...), else operator when that
// certificate is there, else submitter.
absl::StatusOr<security::TransportSecurity> CliTransportSecurity(const std::string& tls_dir,
                                                                 const std::string& identity);

// "host:port" with a non-empty host and a port in 1..65535.
bool IsHostPort(absl::string_view address);

absl::StatusOr<std::unique_ptr<client::SchedulerClient>> ConnectToScheduler(
    const SchedulerTarget& target, const GlobalOptions& options);

// Reports a failed RPC as one line and returns the matching exit code:
// unreachable 3, NOT_FOUND 4, INVALID_ARGUMENT 5, anything else 1.
int FailRpc(const absl::Status& status, const SchedulerTarget& target,
            absl::string_view rpc_name);

// FailRpc for an RPC about one job: NOT_FOUND reads "no job with id 'ID'"
// (exit 4) when job_id is set.
int FailJobRpc(const absl::Status& status, const SchedulerTarget& target,
               absl::string_view rpc_name, absl::string_view job_id);

// The job (GetJob), or nullopt after reporting why as FailJobRpc does;
// *exit_code then holds the code to return.
std::optional<v1::Job> GetJobOrFail(client::SchedulerClient& client,
                                    const SchedulerTarget& target, const std::string& job_id,
                                    int* exit_code);

// Resolves the scheduler, connects and returns run(client, target); when
// there is no usable address, reports why and returns that exit code.
int RunWithScheduler(
    const GlobalOptions& options,
    absl::FunctionRef<int(client::SchedulerClient& client, const SchedulerTarget& target)> run);

// The required JOB argument of the commands about one job.
void AddJobArgument(CLI::App& command, std::string& job_id);

// A parsed subcommand and what running it means.
struct Subcommand {
  CLI::App* app;
  std::function<int()> run;
};

// A subcommand that talks to the scheduler: the global options are on it,
// and its own options live in `options` for as long as the CLI runs.
template <typename Options>
struct SchedulerCommand {
  using Run = int (*)(const Options& options, client::SchedulerClient& client,
                      const SchedulerTarget& target);

  CLI::App* app;
  std::shared_ptr<Options> options;
  const GlobalOptions* globals;

  // Running it connects (RunWithScheduler), then calls run.
  Subcommand RunsWith(Run run) const {
    return {app, [options = options, globals = globals, run]() {
              return RunWithScheduler(
                  *globals, [&](client::SchedulerClient& client, const SchedulerTarget& target) {
                    return run(*options, client, target);
                  });
            }};
  }
};

template <typename Options>
SchedulerCommand<Options> AddSchedulerCommand(CLI::App& parent, GlobalOptions& globals,
                                              const std::string& name,
                                              const std::string& description) {
  CLI::App* app = parent.add_subcommand(name, description);
  AddGlobalOptions(*app, globals);
  return {app, std::make_shared<Options>(), &globals};
}

// Registration of each subcommand (one file each).
Subcommand AddVersionCommand(CLI::App& parent);
Subcommand AddNodesCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddStatusCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddDrainCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddSubmitCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddJobsCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddJobCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddWatchCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddCancelCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddPlotCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddPlanCommand(CLI::App& parent, GlobalOptions& globals);
Subcommand AddRebalanceCommand(CLI::App& parent, GlobalOptions& globals);
std::vector<Subcommand> AddClusterCommands(CLI::App& parent);
Subcommand AddCertsCommand(CLI::App& parent);
std::vector<Subcommand> AddToolCommands(CLI::App& parent);

// Prints JSON the same way everywhere (two-space indent, newline).
void PrintJson(const nlohmann::json& json);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_COMMON_H_
