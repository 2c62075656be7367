#ifndef CORESCAPE_TOOLS_SCAPE_DRIVER_FLAGS_H_
#define CORESCAPE_TOOLS_SCAPE_DRIVER_FLAGS_H_

#include "absl/status/statusor.h"
#include "tools/scape/training_rank.h"

namespace corescape::scape_tool {

// The training configuration from the command-line flags shared by
// corescape-scape-train (P ranks as threads) and corescape-scape-rank (one
// rank per process): the run's shape (run_shape_flags.h), --method,
// --density, ...
// InvalidArgument names a flag with an unknown value.
absl::StatusOr<DriverConfig> DriverConfigFromFlags();

}  // namespace corescape::scape_tool

#endif  // CORESCAPE_TOOLS_SCAPE_DRIVER_FLAGS_H_
