#ifndef CORESCAPE_RUNTIME_JOB_JOB_DEVICE_H_
#define CORESCAPE_RUNTIME_JOB_JOB_DEVICE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "corescape/v1/common.pb.h"
#include "corescape/v1/job.pb.h"
#include "runtime/device/device.h"
#include "runtime/model/precision.h"

// The device a job asks for (JobSpec.device) and the one a worker daemon
// serves (Resources.device, from --device), as specs, flags, listings and
// refusals spell them. The scheduler places by them (placement.h); the
// worker trains on the device TrainingDeviceFor picks, or refuses.
namespace corescape::job {

// What a job trains on: CPU unless its spec says CUDA.
v1::Device JobDevice(const v1::JobSpec& spec);

// What a worker serves: CPU unless its registration says CUDA.
v1::Device ServedDeviceKind(const v1::ServedDevice& device);

// "cpu" or "cuda", as specs and --device spell them.
std::string DeviceKindName(v1::Device device);

// "cpu, cuda": the names a job's device may have.
std::string JobDeviceNames();

// A job's device by its name ("cpu" or "cuda", any case); INVALID_ARGUMENT
// listing the names otherwise.
absl::StatusOr<v1::Device> ParseJobDevice(absl::string_view name);

// "cpu", or "cuda:0 (NVIDIA H200, 139.8 GiB)".
std::string DescribeServedDevice(const v1::ServedDevice& device);

// Where a worker serving `served` trains job `job_id` of `spec`, and in
// what precision: a CPU job on the CPU in fp32 (on any worker: a GPU
// worker's CPU trains it); a CUDA job on the worker's GPU in bf16. A CUDA
// job on a worker serving no GPU is FAILED_PRECONDITION naming both
// devices: it never trains on the CPU in place of the GPU it asked for.
struct TrainingDevice {
  device::Device device;
  model::Precision precision = model::Precision::kFp32;
};
absl::StatusOr<TrainingDevice> TrainingDeviceFor(const std::string& job_id,
                                                 const v1::JobSpec& spec,
                                                 const v1::ServedDevice& served);

// The dense peak (TFLOP/s) a job's MFU is measured against, when it trains
// on the device the worker serves: `operator_peak` (the worker's
// --peak_tflops) if > 0, else the GPU's known one (model::DensePeakTflops).
// 0, unknown, otherwise: a GPU worker's CPU training a CPU job has no peak
// of its GPU's.
double MfuPeakTflops(const v1::ServedDevice& served, const TrainingDevice& training,
                     double operator_peak);

}  // namespace corescape::job

#endif  // CORESCAPE_RUNTIME_JOB_JOB_DEVICE_H_
