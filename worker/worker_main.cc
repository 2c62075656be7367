// corescape-worker: a compute daemon. It registers with the scheduler, holds
// its lease, and trains its rank of the jobs assigned over its session.
#include <memory>

#include "absl/strings/str_cat.h"
#include "runtime/control/node_daemon.h"
#include "worker/job_runner.h"

namespace {

// Until the data plane lands, a job can only run on one worker.
absl::StatusOr<std::unique_ptr<corescape::train::DataParallelGroup>> MakeGroup(
    const corescape::v1::JobAssignment& assignment) {
  if (assignment.world_size() == 1) {
    return std::make_unique<corescape::train::SingleProcessGroup>();
  }
  return absl::UnimplementedError(absl::StrCat(
      "this worker has no data plane yet: cannot join a job of ", assignment.world_size(),
      " workers"));
}

}  // namespace

int main(int argc, char** argv) {
  corescape::worker::JobRunner runner(MakeGroup, /*threads=*/0);
  corescape::NodeDaemonHooks hooks;
  hooks.on_command = [&](const corescape::v1::SchedulerCommand& command,
                         corescape::NodeAgent& agent) { runner.Handle(command, agent); };
  hooks.on_shutdown = [&]() { runner.Shutdown(); };
  return corescape::RunNodeDaemon(corescape::v1::WORKER, argc, argv, hooks);
}
