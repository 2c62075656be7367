// Fuzzes ParseDevice, which reads device strings from job specs and flags:
// nothing may crash it, and whatever it accepts must print back to itself.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_target.h"
#include "runtime/device/device.h"

namespace corescape::fuzz {

bool ParseFuzzInput(absl::string_view input) {
  auto device = device::ParseDevice(input);
  if (!device.ok()) return false;
  auto again = device::ParseDevice(device->ToString());
  if (!again.ok() || !(*again == *device)) std::abort();
  return true;
}

std::vector<std::string> FuzzSeeds() {
  std::vector<std::string> seeds = {"cuda"};
  for (const device::Device& d : {device::Device::Cpu(), device::Device::Cuda(0), device::Device::Cuda(7),
                                  device::Device::Cuda(device::kMaxCudaOrdinal)}) {
    seeds.push_back(d.ToString());
  }
  return seeds;
}

}  // namespace corescape::fuzz
