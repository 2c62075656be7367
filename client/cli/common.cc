#include "client/cli/common.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/cli/commands/cluster_file.h"
#include "client/cli/commands/process.h"
#include "runtime/base/printable_text.h"

namespace corescape::cli {

namespace {

// Errors are promised to be one line; gRPC messages sometimes are not, and
// they may quote what other users stored: escaped like every such text.
std::string OneLine(absl::string_view text) {
  std::string line = absl::StrReplaceAll(text, {{"\r", " "}, {"\n", " "}});
  absl::StripAsciiWhitespace(&line);
  line = EscapeUnsafeCharacters(line);
  return line;
}

// The local cluster's record when its scheduler serves `address`.
std::optional<ClusterRecord> LocalClusterAt(const std::string& address) {
  absl::StatusOr<std::string> home = CorescapeHome();
  if (!home.ok()) return std::nullopt;
  absl::StatusOr<ClusterRecord> record = ReadClusterFile(ClusterFilePath(*home));
  if (!record.ok() || record->scheduler_address != address) return std::nullopt;
  return *std::move(record);
}

}  // namespace

int Fail(int exit_code, absl::string_view message) {
  std::cout.flush();
  std::cerr << "corescape: error: " << OneLine(message) << std::endl;
  return exit_code;
}

void Warn(absl::string_view message) {
  std::cerr << "corescape: warning: " << OneLine(message) << std::endl;
}

void AddGlobalOptions(CLI::App& app, GlobalOptions& options) {
  app.add_option("--scheduler", options.scheduler,
                 "Scheduler address (default: $CORESCAPE_SCHEDULER, else the "
                 "local cluster started by `corescape cluster up`)")
      ->type_name("HOST:PORT");
  app.add_option("--rpc-timeout", options.rpc_timeout_seconds,
                 "Deadline for each call to the scheduler")
      ->type_name("SECONDS")
      ->check(PositiveSeconds())
      ->capture_default_str();
  app.add_option("--tls-dir", options.tls_dir,
                 "Certificates from `corescape certs init` (default: $CORESCAPE_TLS_DIR, "
                 "else the local cluster's)")
      ->type_name("DIR");
  app.add_option("--identity", options.identity,
                 "Which certificate in the TLS directory to present (default: operator if "
                 "there, else submitter)")
      ->type_name("NAME");
  app.add_flag("--insecure", options.insecure,
               "Talk to a plaintext scheduler (no TLS, no certificate)");
}

CLI::Validator PositiveSeconds() {
  constexpr double kMaxSeconds = 365.0 * 24 * 3600;
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double seconds = 0;
        if (!absl::SimpleAtod(text, &seconds) || !(seconds > 0) ||
            seconds > kMaxSeconds) {
          return absl::StrCat("'", text,
                              "' is not a positive number of seconds");
        }
        return "";
      },
      "", "POSITIVE_SECONDS");
}

CLI::Validator Silent(CLI::Validator validator) {
  validator.description("");
  return validator;
}

bool IsHostPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  int port = 0;
  absl::string_view port_text = address.substr(colon + 1);
  if (port_text.empty() ||
      port_text.find_first_not_of("0123456789") != absl::string_view::npos ||
      !absl::SimpleAtoi(port_text, &port)) {
    return false;
  }
  return port >= 1 && port <= 65535;
}

absl::StatusOr<SchedulerTarget> ResolveScheduler(const GlobalOptions& options) {
  SchedulerTarget target;
  std::optional<ClusterRecord> local_cluster;  // when the address is its scheduler's
  if (!options.scheduler.empty()) {
    target = {options.scheduler, "--scheduler"};
  } else if (const char* env = std::getenv("CORESCAPE_SCHEDULER");
             env != nullptr && *env != '\0') {
    target = {env, "$CORESCAPE_SCHEDULER"};
  } else {
    absl::StatusOr<std::string> home = CorescapeHome();
    if (home.ok()) {
      const std::string path = ClusterFilePath(*home);
      absl::StatusOr<ClusterRecord> record = ReadClusterFile(path);
      if (record.ok() && !record->scheduler_address.empty()) {
        // Say so plainly when the local cluster is gone, rather than
        // reporting a refused connection.
        const DaemonRecord* scheduler = record->Scheduler();
        if (scheduler != nullptr && !IsDaemonAlive(*scheduler)) {
          return absl::UnavailableError(absl::StrCat(
              "the local cluster's scheduler (", record->scheduler_address,
              ", pid ", scheduler->pid,
              ") is not running; start a cluster "
              "with `corescape cluster up` (after `corescape cluster down`) "
              "or pass --scheduler HOST:PORT"));
        }
        target = {record->scheduler_address, path};
        local_cluster = *record;
      } else if (!record.ok() && !absl::IsNotFound(record.status())) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot read the local cluster file: ", record.status().message(),
            "; pass --scheduler HOST:PORT"));
      }
    }
  }
  if (target.address.empty()) {
    return absl::FailedPreconditionError(
        "no scheduler address: pass --scheduler HOST:PORT, set "
        "CORESCAPE_SCHEDULER, or start a local cluster with `corescape "
        "cluster up`");
  }
  if (!IsHostPort(target.address)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid scheduler address '", target.address, "' (from ",
                     target.source, "): expected HOST:PORT"));
  }
  if (options.insecure) {
    if (!options.tls_dir.empty()) {
      return absl::InvalidArgumentError("--tls-dir and --insecure: give one, not both");
    }
    return target;
  }
  if (!options.tls_dir.empty()) {
    target.tls_dir = options.tls_dir;
  } else if (const char* env = std::getenv("CORESCAPE_TLS_DIR"); env != nullptr && *env != '\0') {
    target.tls_dir = env;
  } else if (local_cluster.has_value()) {
    // The local cluster's own choice: its certificates, or plaintext.
    target.tls_dir = local_cluster->tls_dir;
  } else if (std::optional<ClusterRecord> local = LocalClusterAt(target.address);
             local.has_value()) {
    target.tls_dir = local->tls_dir;
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "no TLS directory for the scheduler at ", target.address, " (from ", target.source,
        "): pass --tls-dir DIR (made by `corescape certs init`), set CORESCAPE_TLS_DIR, "
        "or --insecure for a plaintext scheduler"));
  }
  return target;
}

absl::StatusOr<security::TransportSecurity> CliTransportSecurity(const std::string& tls_dir,
                                                                 const std::string& identity) {
  if (!identity.empty()) return security::TransportSecurity::FromTlsDir(tls_dir, identity);
  auto as_operator = security::TransportSecurity::FromTlsDir(tls_dir, "operator");
  if (as_operator.ok()) return as_operator;
  auto as_submitter = security::TransportSecurity::FromTlsDir(tls_dir, "submitter");
  if (as_submitter.ok()) return as_submitter;
  return as_operator.status();
}

absl::StatusOr<std::unique_ptr<client::SchedulerClient>> ConnectToScheduler(
    const SchedulerTarget& target, const GlobalOptions& options) {
  security::TransportSecurity security = security::TransportSecurity::Insecure();
  if (!target.tls_dir.empty()) {
    auto loaded = CliTransportSecurity(target.tls_dir, options.identity);
    if (!loaded.ok()) return loaded.status();
    security = *std::move(loaded);
  }
  return std::make_unique<client::SchedulerClient>(target.address, security,
                                                   absl::Seconds(options.rpc_timeout_seconds));
}

int RunWithScheduler(
    const GlobalOptions& options,
    absl::FunctionRef<int(client::SchedulerClient& client, const SchedulerTarget& target)> run) {
  absl::StatusOr<SchedulerTarget> target = ResolveScheduler(options);
  if (!target.ok()) {
    return Fail(absl::IsUnavailable(target.status()) ? kExitUnreachable : kExitUsage,
                target.status().message());
  }
  target->rpc_timeout = absl::Seconds(options.rpc_timeout_seconds);
  auto client = ConnectToScheduler(*target, options);
  if (!client.ok()) return Fail(kExitUsage, client.status().message());
  return run(**client, *target);
}

void AddJobArgument(CLI::App& command, std::string& job_id) {
  command.add_option("JOB", job_id, "Job id")->required();
}

int FailJobRpc(const absl::Status& status, const SchedulerTarget& target,
               absl::string_view rpc_name, absl::string_view job_id) {
  if (absl::IsNotFound(status) && !job_id.empty()) {
    return Fail(kExitNotFound, absl::StrCat("no job with id '", job_id, "'"));
  }
  return FailRpc(status, target, rpc_name);
}

std::optional<v1::Job> GetJobOrFail(client::SchedulerClient& client,
                                    const SchedulerTarget& target, const std::string& job_id,
                                    int* exit_code) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  absl::StatusOr<v1::GetJobResponse> response = client.GetJob(request);
  if (!response.ok()) {
    *exit_code = FailJobRpc(response.status(), target, "GetJob", job_id);
    return std::nullopt;
  }
  return response->job();
}

int FailRpc(const absl::Status& status, const SchedulerTarget& target,
            absl::string_view rpc_name) {
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    return Fail(
        kExitUnreachable,
        absl::StrCat("scheduler at ", target.address,
                     " is unreachable (no answer to ", rpc_name, " within ",
                     absl::FormatDuration(target.rpc_timeout),
                     "; address from ", target.source, ")"));
  }
  if (status.code() == absl::StatusCode::kUnavailable) {
    return Fail(
        kExitUnreachable,
        absl::StrCat("scheduler at ", target.address, " is unreachable (",
                     status.message(), "; address from ", target.source, ")"));
  }
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return Fail(kExitNotFound, status.message());
    case absl::StatusCode::kInvalidArgument:
      return Fail(kExitInvalidArgument, status.message());
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return Fail(kExitFailure,
                  absl::StrCat(rpc_name, " refused: ", absl::StatusCodeToString(status.code()),
                               ": ", status.message(), " (certificates from ",
                               target.tls_dir.empty() ? "none: --insecure" : target.tls_dir, ")"));
    case absl::StatusCode::kUnimplemented:
      return Fail(
          kExitFailure,
          absl::StrCat("the scheduler at ", target.address,
                       " does not implement ", rpc_name,
                       status.message().empty()
                           ? ""
                           : absl::StrCat(" (", status.message(), ")")));
    default:
      return Fail(kExitFailure,
                  absl::StrCat(rpc_name, " failed: ",
                               absl::StatusCodeToString(status.code()), ": ",
                               status.message()));
  }
}

void PrintJson(const nlohmann::json& json) {
  std::cout << json.dump(2) << std::endl;
}

}  // namespace corescape::cli
