#ifndef CORESCAPE_DAEMON_NODE_DAEMON_H_
#define CORESCAPE_DAEMON_NODE_DAEMON_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "corescape/v1/common.pb.h"
#include "corescape/v1/node.pb.h"
#include "grpcpp/server_builder.h"
#include "daemon/node_agent.h"
#include "daemon/run_metrics.h"
#include "runtime/comm/transport.h"

namespace corescape {

// What a particular daemon adds to the common node life cycle.
struct NodeDaemonHooks {
  // Adds what the daemon serves to the resources it detected (the worker's
  // --device), right after its flags are parsed and before it serves or
  // registers: an error stops the daemon with that message (exit 2).
  std::function<absl::Status(v1::Resources& resources)> describe_resources;
  // Adds the daemon's own gRPC services (health and reflection are added for
  // every daemon).
  std::function<void(grpc::ServerBuilder&)> register_services;
  // Starts the node's data plane before it registers, listening on
  // `listen_address` (HOST:PORT, --data_port) and reachable at
  // `advertise_host`; returns the HOST:PORT to register as its data address.
  // `run_metrics` is what the daemon's job runners report to (null without
  // --metrics_listen); it lives until RunNodeDaemon returns.
  std::function<absl::StatusOr<std::string>(const std::string& listen_address,
                                            const std::string& advertise_host,
                                            RunMetrics* run_metrics)>
      start_data_plane;
  // Commands pushed by the scheduler other than lease grants (called on the
  // session's reader thread: do not block). Drain and Shutdown have default
  // handling before this is called. The agent sends reports back.
  std::function<void(const v1::SchedulerCommand&, NodeAgent&)> on_command;
  // Runs on SIGTERM before the node deregisters: stop local work.
  std::function<void()> on_shutdown;
};

// The UCX transport both node daemons' start_data_plane hooks make: listening
// on `listen_address`, advertised as `advertise_host`, its dropped-message
// counters exported through `run_metrics` (may be null).
absl::StatusOr<std::unique_ptr<comm::Transport>> StartDataPlaneTransport(
    const std::string& listen_address, const std::string& advertise_host,
    RunMetrics* run_metrics);

// main() of a worker or attention-server daemon: parses the shared node
// flags (--scheduler, --name, --listen, --advertise_host, --data_address,
// --port_file), serves gRPC, registers with the scheduler and keeps the
// lease until SIGTERM, then deregisters and exits 0.
int RunNodeDaemon(v1::NodeRole role, int argc, char** argv,
                  NodeDaemonHooks hooks = {});

}  // namespace corescape

#endif  // CORESCAPE_DAEMON_NODE_DAEMON_H_
