#ifndef CORESCAPE_TOOLS_SCAPE_RUN_SHAPE_FLAGS_H_
#define CORESCAPE_TOOLS_SCAPE_RUN_SHAPE_FLAGS_H_

#include "absl/status/status.h"
#include "tools/scape/training_rank.h"

namespace corescape::scape_tool {

// The flags that shape a SCAPE run over P ranks, defined once for the
// drivers (driver_flags.h) and the step-breakdown benchmark (bench/scape):
// --data, --model, --ranks, --seq_len, --micro_batch, --rule. Sets those
// fields of `config`; INVALID_ARGUMENT naming --rule for an unknown rule.
absl::Status SetRunShapeFromFlags(DriverConfig& config);

}  // namespace corescape::scape_tool

#endif  // CORESCAPE_TOOLS_SCAPE_RUN_SHAPE_FLAGS_H_
