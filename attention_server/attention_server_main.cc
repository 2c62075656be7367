// corescape-attention-server: a core-attention daemon. It registers with the
// scheduler and holds its lease; for each DISAGGREGATED job it is assigned,
// it joins the job's attention communicator on the UCX data plane, receives
// every worker's Q/K/V rows per layer, computes them in one fused kernel call
// and sends back O/LSE (forward) or dQ/dK/dV (backward).
#include <memory>

#include "absl/flags/flag.h"
#include "attention_server/server_job_runner.h"
#include "runtime/comm/transport.h"
#include "daemon/node_daemon.h"
#include "runtime/job/job_communicator.h"
#include "runtime/kernels/cpu/blas_threads.h"

ABSL_FLAG(absl::Duration, idle_timeout, absl::Minutes(10),
          "how long to wait for the workers' next exchange (they optimise, validate and "
          "checkpoint in between) before failing the job; a dead peer is noticed sooner");
ABSL_FLAG(int32_t, threads, 0, "kernel threads (0: CORESCAPE_NUM_THREADS or all cores)");

int main(int argc, char** argv) {
  corescape::kernels::StopBlasThreads();
  std::unique_ptr<corescape::comm::Transport> transport;
  auto make_communicator = [&](const corescape::v1::JobAssignment& assignment)
      -> absl::StatusOr<std::unique_ptr<corescape::comm::Communicator>> {
    return corescape::comm::Communicator::Create(
        transport.get(),
        corescape::job::JobCommunicatorOptions(assignment,
                                               corescape::job::JobCommunicator::kAttention,
                                               absl::GetFlag(FLAGS_idle_timeout)));
  };
  std::unique_ptr<corescape::attention_server::ServerJobRunner> runner;
  corescape::NodeDaemonHooks hooks;
  hooks.start_data_plane = [&](const std::string& listen_address,
                               const std::string& advertise_host,
                               corescape::RunMetrics* run_metrics) -> absl::StatusOr<std::string> {
    auto created =
        corescape::StartDataPlaneTransport(listen_address, advertise_host, run_metrics);
    if (!created.ok()) return created.status();
    transport = *std::move(created);
    runner = std::make_unique<corescape::attention_server::ServerJobRunner>(
        make_communicator, absl::GetFlag(FLAGS_threads), run_metrics);
    return transport->address();
  };
  hooks.on_command = [&](const corescape::v1::SchedulerCommand& command,
                         corescape::NodeAgent& agent) { runner->Handle(command, agent); };
  hooks.on_shutdown = [&]() { runner->Shutdown(); };
  const int status =
      corescape::RunNodeDaemon(corescape::v1::ATTENTION_SERVER, argc, argv, hooks);
  runner.reset();
  transport.reset();
  return status;
}
