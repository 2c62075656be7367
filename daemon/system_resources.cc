#include "daemon/system_resources.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "runtime/device/device.h"
#include "glog/logging.h"

#ifdef CORESCAPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace corescape {

#ifdef CORESCAPE_WITH_CUDA
const bool kBuiltWithCuda = true;
#else
const bool kBuiltWithCuda = false;
#endif

std::vector<GpuProperties> DetectGpus() {
  std::vector<GpuProperties> gpus;
#ifdef CORESCAPE_WITH_CUDA
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // No driver or no device: a CPU node, not an error.
    LOG(INFO) << "no CUDA devices: " << cudaGetErrorString(error);
    return gpus;
  }
  for (int i = 0; i < count; ++i) {
    GpuProperties gpu;
    cudaDeviceProp properties;
    if (cudaGetDeviceProperties(&properties, i) == cudaSuccess) {
      gpu.name = properties.name;
      gpu.memory_bytes = static_cast<int64_t>(properties.totalGlobalMem);
    }
    gpus.push_back(std::move(gpu));
  }
#endif
  return gpus;
}

v1::Resources DetectResources() {
  v1::Resources resources;
  resources.set_cpu_cores(static_cast<int>(std::thread::hardware_concurrency()));
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    resources.set_memory_bytes(static_cast<int64_t>(pages) * page_size);
  }
  const std::vector<GpuProperties> gpus = DetectGpus();
  resources.set_gpus(static_cast<int>(gpus.size()));
  for (const GpuProperties& gpu : gpus) {
    if (!gpu.name.empty()) resources.add_gpu_names(gpu.name);
  }
  return resources;
}

absl::StatusOr<v1::ServedDevice> SelectServedDevice(absl::string_view flag,
                                                    const std::vector<GpuProperties>& gpus,
                                                    bool built_with_cuda) {
  absl::StatusOr<device::Device> parsed = device::ParseDevice(flag);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--device: ", parsed.status().message()));
  }
  v1::ServedDevice device;
  if (parsed->is_cpu()) {
    device.set_kind(v1::CPU);
    return device;
  }
  const int index = parsed->index;
  if (!built_with_cuda) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--device=", parsed->ToString(), ": this worker was built without CUDA and sees no GPU "
        "(build it with --config=cuda, or run --device=cpu)"));
  }
  if (index >= static_cast<int>(gpus.size())) {
    std::vector<std::string> present;
    for (size_t i = 0; i < gpus.size(); ++i) {
      present.push_back(absl::StrCat("cuda:", i, " ", gpus[i].name));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "--device=", parsed->ToString(), ": no such GPU; this machine has ",
        gpus.empty() ? "no CUDA GPU (no driver or device found)"
                     : absl::StrCat(gpus.size(), " (", absl::StrJoin(present, ", "), ")")));
  }
  device.set_kind(v1::CUDA);
  device.set_cuda_index(index);
  device.set_gpu_model(gpus[index].name);
  device.set_gpu_memory_bytes(gpus[index].memory_bytes);
  return device;
}

std::string LocalHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace corescape
