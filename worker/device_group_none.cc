// ConnectDeviceGroup in a build without CUDA.
#include "absl/strings/str_cat.h"
#include "worker/device_group.h"

namespace corescape::worker {

absl::StatusOr<std::unique_ptr<train::DataParallelGroup>> ConnectDeviceGroup(
    std::unique_ptr<train::DataParallelGroup>, const v1::JobAssignment& assignment,
    const device::Device& device, absl::Duration) {
  return absl::FailedPreconditionError(
      absl::StrCat("job ", assignment.job_id(), ": NCCL on ", device.ToString(),
                   " needs a worker built with --config=cuda"));
}

}  // namespace corescape::worker
