#ifndef CORESCAPE_RUNTIME_CONTROL_MODEL_SPEC_H_
#define CORESCAPE_RUNTIME_CONTROL_MODEL_SPEC_H_

#include "absl/status/statusor.h"
#include "corescape/v1/job.pb.h"
#include "runtime/model/model_config.h"

namespace corescape {

// The model a JobSpec describes: its preset with the spec's non-zero fields
// overriding it. The scheduler (validation, SCAPE partition maps) and the
// worker (the trainer) must agree on it, so both call this. Not validated:
// callers run ModelConfig::Validate() where they need to.
absl::StatusOr<model::ModelConfig> ModelConfigFromSpec(const v1::ModelSpec& spec);

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_CONTROL_MODEL_SPEC_H_
