// corescape-worker: a compute daemon. It registers with the scheduler, holds
// its lease, and trains its rank of the jobs assigned over its session; the
// ranks of a job talk over the UCX data plane, and DISAGGREGATED jobs send
// their core attention to the job's attention servers over it too.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "runtime/comm/transport.h"
#include "daemon/node_daemon.h"
#include "daemon/system_resources.h"
#include "runtime/kernels/cpu/blas_threads.h"
#include "worker/core_attention.h"
#include "worker/device_group.h"
#include "runtime/job/job_communicator.h"
#include "runtime/job/job_spec.h"
#include "worker/job_runner.h"

ABSL_FLAG(absl::Duration, collective_timeout, absl::Seconds(30),
          "a data-plane operation waiting longer than this for a peer fails the step");
ABSL_FLAG(int32_t, threads, 0, "compute threads per job (0: CORESCAPE_NUM_THREADS or all cores)");
ABSL_FLAG(std::string, device, "cpu",
          "what this worker trains on: cpu, or cuda:N for GPU N of this machine (one worker "
          "daemon per GPU); a GPU that does not exist stops the worker at start-up");
ABSL_FLAG(double, peak_tflops, 0,
          "this worker's device's dense peak in TFLOP/s at a job's precision, for the MFU its "
          "steps report; 0: NVIDIA's figure for a GPU it knows (H100, H200, GH200, A100), else "
          "no MFU");
ABSL_FLAG(std::string, checkpoint_root, "",
          "the directory tree jobs' checkpoint directories must lie in (an assignment "
          "outside it is refused); empty: the worker's state directory (systemd's "
          "$STATE_DIRECTORY), or without one the directory the worker was started in");
ABSL_FLAG(std::string, data_root, "",
          "the directory tree jobs' datasets must lie in (a job naming data outside it is "
          "refused at submit, and by the worker before it opens anything); empty: as "
          "--checkpoint_root's default, the worker's state directory or the directory it "
          "was started in");

namespace {

// A root flag's value, or the default both roots share, as an absolute path.
std::string NodeRoot(const std::string& flag_value) {
  std::string root = flag_value;
  if (root.empty()) {
    // systemd lists several directories separated by ':' when a unit has several.
    const char* state = std::getenv("STATE_DIRECTORY");
    root = state != nullptr ? std::string(state).substr(0, std::string(state).find(':')) : "";
  }
  std::error_code error;
  if (root.empty()) root = std::filesystem::current_path(error).string();
  return std::filesystem::absolute(root, error).lexically_normal().string();
}

}  // namespace

int main(int argc, char** argv) {
  corescape::kernels::StopBlasThreads();
  std::unique_ptr<corescape::comm::Transport> transport;
  // What this worker serves (--device), known once describe_resources ran.
  corescape::v1::ServedDevice device;
  auto make_group = [&](const corescape::v1::JobAssignment& assignment,
                        const corescape::device::Device& training_device)
      -> absl::StatusOr<std::unique_ptr<corescape::train::DataParallelGroup>> {
    if (assignment.world_size() == 1) {
      return std::make_unique<corescape::train::SingleProcessGroup>();
    }
    auto group = corescape::job::ConnectDataParallelGroup(
        transport.get(), assignment, absl::GetFlag(FLAGS_collective_timeout));
    if (!group.ok()) return group.status();
    std::unique_ptr<corescape::train::DataParallelGroup> data_plane = *std::move(group);
    // A job training on GPUs synchronizes over NCCL, bootstrapped over the
    // data plane.
    if (!training_device.is_cuda()) return data_plane;
    return corescape::worker::ConnectDeviceGroup(std::move(data_plane), assignment,
                                                 training_device,
                                                 absl::GetFlag(FLAGS_collective_timeout));
  };
  // Flags are parsed inside RunNodeDaemon, before any hook runs.
  std::unique_ptr<corescape::worker::JobRunner> runner;
  std::string checkpoint_root, data_root;  // known once describe_resources ran
  corescape::NodeDaemonHooks hooks;
  hooks.describe_resources = [&](corescape::v1::Resources& resources) -> absl::Status {
    const double peak_tflops = absl::GetFlag(FLAGS_peak_tflops);
    if (!std::isfinite(peak_tflops) || peak_tflops < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--peak_tflops=", peak_tflops, ": a dense peak is a number >= 0"));
    }
    auto selected = corescape::SelectServedDevice(
        absl::GetFlag(FLAGS_device), corescape::DetectGpus(), corescape::kBuiltWithCuda);
    if (!selected.ok()) return selected.status();
    device = *selected;
    *resources.mutable_device() = device;
    checkpoint_root = NodeRoot(absl::GetFlag(FLAGS_checkpoint_root));
    data_root = NodeRoot(absl::GetFlag(FLAGS_data_root));
    // Resolved here, where their symbolic links are: the scheduler compares
    // job paths against them without this host's filesystem.
    resources.set_checkpoint_root(corescape::job::ResolvedPath(checkpoint_root));
    resources.set_data_root(corescape::job::ResolvedPath(data_root));
    return absl::OkStatus();
  };
  hooks.start_data_plane = [&](const std::string& listen_address,
                               const std::string& advertise_host,
                               corescape::RunMetrics* run_metrics) -> absl::StatusOr<std::string> {
    auto created =
        corescape::StartDataPlaneTransport(listen_address, advertise_host, run_metrics);
    if (!created.ok()) return created.status();
    transport = *std::move(created);
    auto make_attention = [&](const corescape::v1::JobAssignment& assignment,
                              const corescape::train::TrainerConfig& config) {
      return corescape::worker::ConnectCoreAttention(
          transport.get(), assignment, config, absl::GetFlag(FLAGS_collective_timeout));
    };
    LOG(INFO) << "checkpoints only under " << checkpoint_root << " (--checkpoint_root), "
              << "datasets only under " << data_root << " (--data_root)";
    runner = std::make_unique<corescape::worker::JobRunner>(
        make_group, absl::GetFlag(FLAGS_threads), checkpoint_root, data_root, make_attention,
        run_metrics, device, absl::GetFlag(FLAGS_peak_tflops));
    return transport->address();
  };
  hooks.on_command = [&](const corescape::v1::SchedulerCommand& command,
                         corescape::NodeAgent& agent) { runner->Handle(command, agent); };
  hooks.on_shutdown = [&]() { runner->Shutdown(); };
  const int status = corescape::RunNodeDaemon(corescape::v1::WORKER, argc, argv, hooks);
  runner.reset();
  transport.reset();
  return status;
}
