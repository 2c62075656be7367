#include "daemon/node_daemon.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "corescape_version.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/daemon_init.h"
#include "runtime/base/host_port.h"
#include "runtime/base/node_name.h"
#include "runtime/base/server_keepalive.h"
#include "runtime/base/service_notify.h"
#include "runtime/base/shutdown_signal.h"
#include "daemon/node_agent.h"
#include "daemon/node_metrics.h"
#include "daemon/system_resources.h"
#include "runtime/job/job_device.h"
#include "runtime/metrics/metrics_endpoint.h"
#include "runtime/security/security_flags.h"

ABSL_FLAG(std::string, scheduler, "",
          "scheduler HOST:PORT (default: $CORESCAPE_SCHEDULER)");
ABSL_FLAG(std::string, name, "",
          "node name, stable across restarts (default: <hostname>-<role>)");
ABSL_FLAG(std::string, listen, "0.0.0.0:0",
          "HOST:PORT for this daemon's gRPC server; port 0 picks a free port");
ABSL_FLAG(std::string, advertise_host, "",
          "host other nodes reach this one by (default: the hostname)");
ABSL_FLAG(std::string, data_address, "",
          "HOST:PORT of this node's data plane, if it has one");
ABSL_FLAG(int32_t, data_port, 0,
          "port the data plane (UCX) listens on, on --listen's host; 0 picks a free port "
          "(fix it where a firewall or a Kubernetes Service must name it)");
ABSL_FLAG(std::string, port_file, "",
          "if set, the bound HOST:PORT is written here once serving");
ABSL_FLAG(absl::Duration, rpc_timeout, absl::Seconds(5),
          "deadline of each control-plane RPC");

namespace corescape {
namespace {

constexpr char kVersion[] = CORESCAPE_VERSION;

std::string RoleSuffix(v1::NodeRole role) {
  return role == v1::WORKER ? "worker" : "attention-server";
}

struct NodeFlags {
  std::string scheduler;
  std::string name;
  std::string listen;
  std::string advertise_host;
  std::string data_address;
  int32_t data_port = 0;
  security::TransportSecurity security = security::TransportSecurity::Insecure();
  std::string health_listen;  // plaintext health port, or ""
  std::optional<HttpTls> http_tls;  // the metrics endpoint over HTTPS, or plain HTTP
};

NodeFlags ValidatedFlags(v1::NodeRole role) {
  NodeFlags flags;
  flags.scheduler = absl::GetFlag(FLAGS_scheduler);
  if (flags.scheduler.empty()) {
    const char* env = std::getenv("CORESCAPE_SCHEDULER");
    if (env != nullptr) flags.scheduler = env;
  }
  if (flags.scheduler.empty()) {
    ExitWithFlagError("--scheduler: required (or set $CORESCAPE_SCHEDULER)");
  }
  if (auto parsed = ParseHostPort(flags.scheduler); !parsed.ok()) {
    ExitWithFlagError(absl::StrCat("--scheduler: ", parsed.status().message()));
  }
  flags.name = absl::GetFlag(FLAGS_name);
  if (flags.name.empty()) flags.name = LocalHostname() + "-" + RoleSuffix(role);
  if (absl::Status s = ValidateNodeName("--name", flags.name); !s.ok()) {
    ExitWithFlagError(std::string(s.message()));
  }
  flags.listen = absl::GetFlag(FLAGS_listen);
  if (auto parsed = ParseHostPort(flags.listen, 0); !parsed.ok()) {
    ExitWithFlagError(absl::StrCat("--listen: ", parsed.status().message()));
  }
  flags.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  if (flags.advertise_host.empty()) flags.advertise_host = LocalHostname();
  if (auto parsed = ParseHostPort(flags.advertise_host + ":1"); !parsed.ok()) {
    ExitWithFlagError(absl::StrCat("--advertise_host: ", parsed.status().message()));
  }
  flags.data_port = absl::GetFlag(FLAGS_data_port);
  if (flags.data_port < 0 || flags.data_port > 65535) {
    ExitWithFlagError(absl::StrCat("--data_port: ", flags.data_port, " is not a port (0-65535)"));
  }
  flags.data_address = absl::GetFlag(FLAGS_data_address);
  if (!flags.data_address.empty()) {
    if (auto parsed = ParseHostPort(flags.data_address); !parsed.ok()) {
      ExitWithFlagError(absl::StrCat("--data_address: ", parsed.status().message()));
    }
  }
  if (absl::GetFlag(FLAGS_rpc_timeout) <= absl::ZeroDuration()) {
    ExitWithFlagError("--rpc_timeout: must be positive");
  }
  auto security = security::TransportSecurityFromFlags(
      security::CertificateStem({flags.name, security::Role::kNode}));
  if (!security.ok()) ExitWithFlagError(std::string(security.status().message()));
  flags.security = *std::move(security);
  auto health_listen = security::HealthListenFromFlags();
  if (!health_listen.ok()) ExitWithFlagError(std::string(health_listen.status().message()));
  flags.health_listen = *std::move(health_listen);
  auto http_tls = security::HttpTlsFromFlags(flags.security);
  if (!http_tls.ok()) ExitWithFlagError(std::string(http_tls.status().message()));
  flags.http_tls = *std::move(http_tls);
  return flags;
}

}  // namespace

absl::StatusOr<std::unique_ptr<comm::Transport>> StartDataPlaneTransport(
    const std::string& listen_address, const std::string& advertise_host,
    RunMetrics* run_metrics) {
  comm::TransportOptions options;
  options.listen_address = listen_address;
  options.advertise_host = advertise_host;
  absl::StatusOr<std::unique_ptr<comm::Transport>> transport = comm::Transport::Create(options);
  if (transport.ok() && run_metrics != nullptr) run_metrics->WatchDataPlane(transport->get());
  return transport;
}

int RunNodeDaemon(v1::NodeRole role, int argc, char** argv, NodeDaemonHooks hooks) {
  const std::string program = absl::StrCat("corescape-", RoleSuffix(role));
  InitDaemon(argc, argv,
             absl::StrCat(program, " --scheduler=HOST:PORT --name=NAME").c_str());
  NodeFlags flags = ValidatedFlags(role);
  v1::Resources resources = DetectResources();
  if (hooks.describe_resources) {
    if (absl::Status s = hooks.describe_resources(resources); !s.ok()) {
      ExitWithFlagError(std::string(s.message()));
    }
  }
  // Before --port_file is written: whoever waits for it finds this one's too.
  auto metrics = metrics::MetricsEndpoint::StartFromFlags(RoleSuffix(role), flags.http_tls);
  if (!metrics.ok()) {
    LOG(ERROR) << metrics.status();
    return 1;
  }
  std::unique_ptr<NodeMetrics> node_metrics;
  if (*metrics != nullptr) {
    node_metrics = std::make_unique<NodeMetrics>(metrics->get(), role, flags.name);
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  security::SetServerReflection(builder, security::GrpcReflectionFromFlags());
  // A server whose only service is the default health service has no
  // method of its own to poll for and refuses to start: this one answers
  // every other method UNIMPLEMENTED, as gRPC would.
  grpc::CallbackGenericService unknown_methods;
  builder.RegisterCallbackGenericService(&unknown_methods);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  ApplyServerKeepalive(builder);
  int port = 0;
  builder.AddListeningPort(flags.listen, flags.security.ServerCredentials(), &port);
  int health_port = 0;
  security::AddPlaintextHealthPort(builder, flags.health_listen, &health_port);
  if (hooks.register_services) hooks.register_services(builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    LOG(ERROR) << "cannot listen on " << flags.listen;
    return 1;
  }
  if (!flags.health_listen.empty() && health_port == 0) {
    LOG(ERROR) << "--health_listen: cannot listen on " << flags.health_listen;
    return 1;
  }
  HostPort advertised{flags.advertise_host, static_cast<uint16_t>(port)};
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    if (absl::Status s = WriteFileAtomically(port_file, advertised.ToString() + "\n");
        !s.ok()) {
      LOG(ERROR) << "--port_file: " << s;
      return 1;
    }
  }

  if (hooks.start_data_plane) {
    auto data_address =
        hooks.start_data_plane(
            HostPort{ParseHostPort(flags.listen, 0)->host, static_cast<uint16_t>(flags.data_port)}
                .ToString(),
            flags.advertise_host, node_metrics.get());
    if (!data_address.ok()) {
      LOG(ERROR) << "cannot start the data plane: " << data_address.status();
      return 1;
    }
    flags.data_address = *data_address;
  }

  NodeAgentOptions options;
  options.scheduler_address = flags.scheduler;
  options.security = flags.security;
  options.rpc_timeout = absl::GetFlag(FLAGS_rpc_timeout);
  if (node_metrics != nullptr) {
    options.on_send = [m = node_metrics.get()](const v1::NodeMessage& message) {
      m->OnSend(message);
    };
  }
  // systemd's watchdog is pinged per lease renewal (inert unless armed): a
  // wedged agent, or one cut off from the scheduler, stops the pings.
  if (ServiceWatchdogInterval().has_value()) {
    options.on_lease_renewed = []() { NotifyWatchdog(); };
  }
  v1::RegisterRequest& registration = options.registration;
  registration.set_name(flags.name);
  registration.set_role(role);
  registration.set_host(flags.advertise_host);
  registration.set_pid(getpid());
  registration.set_grpc_address(advertised.ToString());
  registration.set_data_address(flags.data_address);
  *registration.mutable_resources() = resources;
  registration.set_version(kVersion);
  absl::BitGen gen;
  registration.set_instance_id(absl::Uniform<uint64_t>(gen));

  LOG(INFO) << program << " " << kVersion << " '" << flags.name << "' serving on "
            << advertised.ToString() << " (" << registration.resources().cpu_cores()
            << " cores, " << registration.resources().gpus() << " GPUs"
            << (role == v1::WORKER
                    ? absl::StrCat(", device ",
                                   job::DescribeServedDevice(registration.resources().device()))
                    : "")
            << "); scheduler " << flags.scheduler << ", "
            << flags.security.Describe();

  NodeAgent* agent_for_hooks = nullptr;
  NodeAgent agent(options, [&](const v1::SchedulerCommand& command) {
    if (command.has_drain()) {
      LOG(INFO) << "draining: " << command.drain().reason();
    } else if (command.has_shutdown()) {
      LOG(INFO) << "scheduler asked us to exit: " << command.shutdown().reason();
      RequestShutdown();
    }
    if (hooks.on_command && agent_for_hooks != nullptr) hooks.on_command(command, *agent_for_hooks);
  });
  agent_for_hooks = &agent;
  if (node_metrics != nullptr) node_metrics->WatchAgent(&agent);
  agent.Start();

  // systemd (Type=notify) counts the node as started once it is registered.
  while (!ShutdownRequested() && !agent.WaitUntilRegistered(absl::Milliseconds(200))) {
  }
  if (!ShutdownRequested()) {
    NotifyReady(absl::StrCat("registered as ", flags.name));
  }
  WaitForShutdown();
  LOG(INFO) << "shutting down";
  NotifyStopping();
  if (hooks.on_shutdown) hooks.on_shutdown();
  agent.Stop(/*deregister=*/true);
  server->GetHealthCheckService()->SetServingStatus(false);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  metrics->reset();  // its collectors read the agent
  LOG(INFO) << "stopped";
  return 0;
}

}  // namespace corescape
