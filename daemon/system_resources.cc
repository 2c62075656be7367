#include "daemon/system_resources.h"

#include <unistd.h>

#include <thread>

#include "glog/logging.h"

#ifdef CORESCAPE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace corescape {
namespace {

void DetectGpus(v1::Resources& resources) {
#ifdef CORESCAPE_WITH_CUDA
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // No driver or no device: a CPU node, not an error.
    LOG(INFO) << "no CUDA devices: " << cudaGetErrorString(error);
    return;
  }
  resources.set_gpus(count);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp properties;
    if (cudaGetDeviceProperties(&properties, i) == cudaSuccess) {
      resources.add_gpu_names(properties.name);
    }
  }
#else
  resources.set_gpus(0);
#endif
}

}  // namespace

v1::Resources DetectResources() {
  v1::Resources resources;
  resources.set_cpu_cores(static_cast<int>(std::thread::hardware_concurrency()));
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    resources.set_memory_bytes(static_cast<int64_t>(pages) * page_size);
  }
  DetectGpus(resources);
  return resources;
}

std::string LocalHostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace corescape
