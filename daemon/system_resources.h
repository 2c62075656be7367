#ifndef CORESCAPE_DAEMON_SYSTEM_RESOURCES_H_
#define CORESCAPE_DAEMON_SYSTEM_RESOURCES_H_

#include <string>

#include "corescape/v1/common.pb.h"

namespace corescape {

// CPU cores, physical memory and GPUs of this machine. GPUs are counted
// through the CUDA runtime when built with --config=cuda, else 0.
v1::Resources DetectResources();

std::string LocalHostname();

}  // namespace corescape

#endif  // CORESCAPE_DAEMON_SYSTEM_RESOURCES_H_
