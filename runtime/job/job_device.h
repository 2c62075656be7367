#ifndef CORESCAPE_RUNTIME_JOB_JOB_DEVICE_H_
#define CORESCAPE_RUNTIME_JOB_JOB_DEVICE_H_

#include <string>

#include "absl/status/status.h"
#include "corescape/v1/common.pb.h"
#include "corescape/v1/job.pb.h"

// The device a job asks for (JobSpec.device) and the one a worker daemon
// serves (Resources.device, from --device), as specs, flags, listings and
// refusals spell them. The scheduler places by them (placement.h); the
// worker refuses what its device cannot train (CheckWorkerCanTrain).
namespace corescape::job {

// What a job trains on: CPU unless its spec says CUDA.
v1::Device JobDevice(const v1::JobSpec& spec);

// What a worker serves: CPU unless its registration says CUDA.
v1::Device ServedDeviceKind(const v1::ServedDevice& device);

// "cpu" or "cuda", as specs and --device spell them.
std::string DeviceKindName(v1::Device device);

// "cpu", or "cuda:0 (NVIDIA H200, 139.8 GiB)".
std::string DescribeServedDevice(const v1::ServedDevice& device);

// Whether a worker serving `served` trains job `job_id` of `spec`: OK for a
// CPU job (on any worker: a GPU worker's CPU trains it). A CUDA job is
// refused: FAILED_PRECONDITION naming both devices on a CPU worker, and
// UNIMPLEMENTED on a CUDA worker, whose training step still runs on the
// CPU only (a CUDA job must never train on the CPU unannounced).
absl::Status CheckWorkerCanTrain(const std::string& job_id, const v1::JobSpec& spec,
                                 const v1::ServedDevice& served);

}  // namespace corescape::job

#endif  // CORESCAPE_RUNTIME_JOB_JOB_DEVICE_H_
