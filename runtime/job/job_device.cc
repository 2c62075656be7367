#include "runtime/job/job_device.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/model/peak_flops.h"

namespace corescape::job {

v1::Device JobDevice(const v1::JobSpec& spec) {
  return spec.device() == v1::CUDA ? v1::CUDA : v1::CPU;
}

v1::Device ServedDeviceKind(const v1::ServedDevice& device) {
  return device.kind() == v1::CUDA ? v1::CUDA : v1::CPU;
}

std::string DeviceKindName(v1::Device device) {
  switch (device) {
    case v1::DEVICE_UNSPECIFIED:
    case v1::CPU:
      return "cpu";
    case v1::CUDA:
      return "cuda";
    default:
      return absl::StrCat("unknown device ", static_cast<int>(device));
  }
}

namespace {

// Every device a job may name, in the order listings give them.
constexpr v1::Device kJobDevices[] = {v1::CPU, v1::CUDA};

}  // namespace

std::string JobDeviceNames() {
  std::string names;
  for (v1::Device device : kJobDevices) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", DeviceKindName(device));
  }
  return names;
}

absl::StatusOr<v1::Device> ParseJobDevice(absl::string_view name) {
  for (v1::Device device : kJobDevices) {
    if (absl::EqualsIgnoreCase(name, DeviceKindName(device))) return device;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", name, "' (", JobDeviceNames(), ")"));
}

std::string DescribeServedDevice(const v1::ServedDevice& device) {
  if (ServedDeviceKind(device) != v1::CUDA) return "cpu";
  std::string out = absl::StrCat("cuda:", device.cuda_index());
  std::string model = device.gpu_model().empty() ? "unknown GPU" : device.gpu_model();
  if (device.gpu_memory_bytes() > 0) {
    absl::StrAppend(&model, absl::StrFormat(", %.1f GiB", device.gpu_memory_bytes() /
                                                              double{int64_t{1} << 30}));
  }
  return absl::StrCat(out, " (", model, ")");
}

absl::StatusOr<TrainingDevice> TrainingDeviceFor(const std::string& job_id,
                                                 const v1::JobSpec& spec,
                                                 const v1::ServedDevice& served) {
  TrainingDevice training;
  if (JobDevice(spec) != v1::CUDA) return training;
  if (ServedDeviceKind(served) != v1::CUDA) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " asks for device cuda but this worker serves ",
        DescribeServedDevice(served), " (no CUDA GPU; start a worker with --device=cuda:N)"));
  }
  training.device = device::Device::Cuda(static_cast<int>(served.cuda_index()));
  training.precision = model::DefaultPrecision(training.device);
  return training;
}

double MfuPeakTflops(const v1::ServedDevice& served, const TrainingDevice& training,
                     double operator_peak) {
  const bool serves_gpu = ServedDeviceKind(served) == v1::CUDA;
  if (training.device.is_cuda() != serves_gpu) return 0;
  if (operator_peak > 0) return operator_peak;
  return serves_gpu ? model::DensePeakTflops(served.gpu_model(), training.precision) : 0;
}

}  // namespace corescape::job
