// corescape-scheduler: the control-plane daemon. Nodes register here and
// hold leases; operators and clients talk to it over gRPC.
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>

#include "absl/flags/flag.h"
#include "corescape_version.h"
#include "absl/strings/str_cat.h"
#include "corescape/v1/operator.grpc.pb.h"
#include "glog/logging.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/daemon_init.h"
#include "runtime/base/host_port.h"
#include "runtime/base/service_notify.h"
#include "runtime/base/shutdown_signal.h"
#include "runtime/metrics/metrics_endpoint.h"
#include "runtime/security/security_flags.h"
#include "scheduler/identity_quotas.h"
#include "scheduler/scheduler_server.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:7070",
          "HOST:PORT to serve gRPC on; port 0 picks a free port");
ABSL_FLAG(std::string, state_dir, "/var/lib/corescape/scheduler",
          "directory of the durable state (SQLite); created if missing");
ABSL_FLAG(std::string, port_file, "",
          "if set, the bound HOST:PORT is written here once serving");
ABSL_FLAG(absl::Duration, lease_ttl, absl::Seconds(10),
          "a node missing heartbeats this long is declared DEAD");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::ZeroDuration(),
          "how often nodes are told to heartbeat; 0 means lease_ttl/4");
ABSL_FLAG(std::string, http_listen, "",
          "HOST:PORT of the read-only status page and its JSON (docs/status_page.md); "
          "port 0 picks a free port; empty: none");
ABSL_FLAG(std::string, http_port_file, "",
          "if set, the status page's bound HOST:PORT is written here once serving");
ABSL_FLAG(int, max_sessions, 4096,
          "Concurrent node Session streams; more are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_watch_streams, 1024,
          "Concurrent WatchEvents and WatchJob streams; more are refused with "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_watch_streams_per_identity, corescape::scheduler::IdentityQuotaLimits{}.max_watch_streams,
          "Concurrent WatchEvents and WatchJob streams one caller identity (its certificate; "
          "without TLS, its address) may hold; more are refused with RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_pending_jobs_per_identity, corescape::scheduler::IdentityQuotaLimits{}.max_pending_jobs,
          "PENDING jobs one submitter identity may have; more submissions are refused with "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_submits_per_minute_per_identity, corescape::scheduler::IdentityQuotaLimits{}.max_submits_per_minute,
          "Job submissions one caller identity may make in any minute; more are refused with "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(absl::Duration, retention, absl::Hours(24 * 7),
          "How long ended jobs keep their events and idempotency keys, and DEAD or "
          "DEREGISTERED nodes their records");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(2),
          "on SIGTERM, how long in-flight RPCs may finish");

namespace {

constexpr char kVersion[] = CORESCAPE_VERSION;

corescape::scheduler::SchedulerConfig ConfigFromFlags() {
  corescape::scheduler::SchedulerConfig config;
  config.listen_address = absl::GetFlag(FLAGS_listen);
  if (auto parsed = corescape::ParseHostPort(config.listen_address, 0); !parsed.ok()) {
    corescape::ExitWithFlagError(absl::StrCat("--listen: ", parsed.status().message()));
  }
  config.state_dir = absl::GetFlag(FLAGS_state_dir);
  if (config.state_dir.empty()) corescape::ExitWithFlagError("--state_dir: required");
  config.lease_ttl = absl::GetFlag(FLAGS_lease_ttl);
  if (config.lease_ttl < absl::Milliseconds(100) || config.lease_ttl > absl::Hours(1)) {
    corescape::ExitWithFlagError("--lease_ttl: must be between 100ms and 1h");
  }
  config.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  if (config.heartbeat_interval == absl::ZeroDuration()) {
    config.heartbeat_interval = config.lease_ttl / 4;
  }
  if (config.heartbeat_interval < absl::Milliseconds(10) ||
      config.heartbeat_interval >= config.lease_ttl) {
    corescape::ExitWithFlagError(
        "--heartbeat_interval: must be at least 10ms and below --lease_ttl");
  }
  if (absl::GetFlag(FLAGS_shutdown_grace) < absl::ZeroDuration()) {
    corescape::ExitWithFlagError("--shutdown_grace: must not be negative");
  }
  config.http_listen = absl::GetFlag(FLAGS_http_listen);
  if (!config.http_listen.empty()) {
    if (auto parsed = corescape::ParseHostPort(config.http_listen, 0); !parsed.ok()) {
      corescape::ExitWithFlagError(
          absl::StrCat("--http_listen: ", parsed.status().message()));
    }
  }
  config.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  if (config.max_sessions < 1 || config.max_sessions > 1000000) {
    corescape::ExitWithFlagError("--max_sessions: must be in [1, 1000000]");
  }
  config.max_watch_streams = absl::GetFlag(FLAGS_max_watch_streams);
  if (config.max_watch_streams < 1 || config.max_watch_streams > 1000000) {
    corescape::ExitWithFlagError("--max_watch_streams: must be in [1, 1000000]");
  }
  for (auto [flag, value, target] : {
           std::tuple("--max_watch_streams_per_identity",
                      absl::GetFlag(FLAGS_max_watch_streams_per_identity),
                      &config.identity_quotas.max_watch_streams),
           std::tuple("--max_pending_jobs_per_identity",
                      absl::GetFlag(FLAGS_max_pending_jobs_per_identity),
                      &config.identity_quotas.max_pending_jobs),
           std::tuple("--max_submits_per_minute_per_identity",
                      absl::GetFlag(FLAGS_max_submits_per_minute_per_identity),
                      &config.identity_quotas.max_submits_per_minute),
       }) {
    if (value < 1 || value > 1000000) {
      corescape::ExitWithFlagError(absl::StrCat(flag, ": must be in [1, 1000000]"));
    }
    *target = value;
  }
  config.retention = absl::GetFlag(FLAGS_retention);
  if (config.retention < absl::Seconds(1)) {
    corescape::ExitWithFlagError("--retention: must be at least 1s");
  }
  auto security = corescape::security::TransportSecurityFromFlags("scheduler");
  if (!security.ok()) corescape::ExitWithFlagError(std::string(security.status().message()));
  config.security = *std::move(security);
  config.grpc_reflection = corescape::security::GrpcReflectionFromFlags();
  auto health_listen = corescape::security::HealthListenFromFlags();
  if (!health_listen.ok()) {
    corescape::ExitWithFlagError(std::string(health_listen.status().message()));
  }
  config.health_listen = *std::move(health_listen);
  auto http_tls = corescape::security::HttpTlsFromFlags(config.security);
  if (!http_tls.ok()) corescape::ExitWithFlagError(std::string(http_tls.status().message()));
  config.http_tls = *std::move(http_tls);
  config.version = kVersion;
  return config;
}

// The systemd watchdog's check: a status RPC to ourselves, which goes
// through the gRPC server and the registry's lock.
bool AnswersStatus(corescape::v1::OperatorService::Stub& self) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  corescape::v1::GetClusterStatusResponse response;
  return self.GetClusterStatus(&context, {}, &response).ok();
}

}  // namespace

int main(int argc, char** argv) {
  corescape::InitDaemon(argc, argv,
                        "corescape-scheduler --listen=HOST:PORT --state_dir=DIR");
  corescape::scheduler::SchedulerConfig config = ConfigFromFlags();
  auto metrics = corescape::metrics::MetricsEndpoint::StartFromFlags("scheduler", config.http_tls);
  if (!metrics.ok()) {
    LOG(ERROR) << "cannot start: " << metrics.status();
    return 1;
  }
  auto server = corescape::scheduler::SchedulerServer::Start(
      config, corescape::RealClock::Get(), *std::move(metrics));
  if (!server.ok()) {
    LOG(ERROR) << "cannot start: " << server.status();
    return 1;
  }
  LOG(INFO) << "corescape-scheduler " << kVersion << " serving on "
            << (*server)->bound_address() << ", lease ttl " << config.lease_ttl << ", "
            << config.security.Describe();
  // Before --port_file: whoever waits for that one finds this one written.
  if (const std::string page = (*server)->status_page_address(); !page.empty()) {
    LOG(INFO) << "status page on " << (*server)->status_page_url();
    if (const std::string port_file = absl::GetFlag(FLAGS_http_port_file);
        !port_file.empty()) {
      if (absl::Status s = corescape::WriteFileAtomically(port_file, page + "\n"); !s.ok()) {
        LOG(ERROR) << "--http_port_file: " << s;
        return 1;
      }
    }
  }
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    if (absl::Status s = corescape::WriteFileAtomically(
            port_file, (*server)->bound_address() + "\n");
        !s.ok()) {
      LOG(ERROR) << "--port_file: " << s;
      return 1;
    }
  }
  corescape::NotifyReady(absl::StrCat("serving on ", (*server)->bound_address()));
  auto self = corescape::v1::OperatorService::NewStub(
      config.security.CreateChannel((*server)->bound_address()));
  auto watchdog = std::make_unique<corescape::ServiceWatchdog>(
      [&self]() { return AnswersStatus(*self); });
  corescape::WaitForShutdown();
  LOG(INFO) << "shutting down";
  corescape::NotifyStopping();
  watchdog.reset();  // the status RPCs fail from here on, by design
  (*server)->Shutdown(absl::GetFlag(FLAGS_shutdown_grace));
  LOG(INFO) << "stopped";
  return 0;
}
