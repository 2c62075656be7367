#ifndef CORESCAPE_SCHEDULER_STATUS_CONVERSION_H_
#define CORESCAPE_SCHEDULER_STATUS_CONVERSION_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace corescape::scheduler {

// absl and gRPC share the canonical code space, so codes map one to one.
inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace corescape::scheduler

#endif  // CORESCAPE_SCHEDULER_STATUS_CONVERSION_H_
