#ifndef CORESCAPE_SCHEDULER_REQUEST_VALIDATION_H_
#define CORESCAPE_SCHEDULER_REQUEST_VALIDATION_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "corescape/v1/node.pb.h"
#include "corescape/v1/operator.pb.h"
#include "runtime/base/node_name.h"

namespace corescape::scheduler {

// Every check returns INVALID_ARGUMENT with a message that names the field
// (e.g. "name: must be 1..63 characters"), never crashes on any input.

inline constexpr int kMaxCpuCores = 4096;
inline constexpr int64_t kMaxMemoryBytes = int64_t{1} << 50;  // 1 PiB
inline constexpr int kMaxGpus = 64;
inline constexpr int64_t kMaxGpuMemoryBytes = int64_t{1} << 44;  // 16 TiB on one GPU
inline constexpr size_t kMaxPathBytes = 4096;  // PATH_MAX

absl::Status ValidateRegisterRequest(const v1::RegisterRequest& request);
absl::Status ValidateDeregisterRequest(const v1::DeregisterRequest& request);
absl::Status ValidateSessionOpen(const v1::NodeMessage& first_message);
absl::Status ValidateDrainNodeRequest(const v1::DrainNodeRequest& request);
absl::Status ValidateListNodesRequest(const v1::ListNodesRequest& request);

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_REQUEST_VALIDATION_H_
