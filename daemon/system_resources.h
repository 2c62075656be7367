#ifndef CORESCAPE_DAEMON_SYSTEM_RESOURCES_H_
#define CORESCAPE_DAEMON_SYSTEM_RESOURCES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "corescape/v1/common.pb.h"

namespace corescape {

// Whether this binary was built with --config=cuda (it can see GPUs at all).
extern const bool kBuiltWithCuda;

// One CUDA GPU of this machine, as the CUDA runtime reports it.
struct GpuProperties {
  std::string name;          // e.g. "NVIDIA H200"
  int64_t memory_bytes = 0;  // total device memory
};

// This machine's CUDA GPUs by ordinal: empty without --config=cuda, a
// driver or a device (a CPU node, not an error).
std::vector<GpuProperties> DetectGpus();

// CPU cores, physical memory and the GPUs DetectGpus finds.
v1::Resources DetectResources();

// The device a worker daemon serves, from its --device flag: "cpu", or
// "cuda:N" naming one of `gpus` (a node with several runs one daemon per
// GPU). INVALID_ARGUMENT for another spelling; FAILED_PRECONDITION saying
// what the machine has when GPU N does not exist (`built_with_cuda` false:
// the binary cannot see GPUs at all).
absl::StatusOr<v1::ServedDevice> SelectServedDevice(absl::string_view flag,
                                                    const std::vector<GpuProperties>& gpus,
                                                    bool built_with_cuda);

std::string LocalHostname();

}  // namespace corescape

#endif  // CORESCAPE_DAEMON_SYSTEM_RESOURCES_H_
