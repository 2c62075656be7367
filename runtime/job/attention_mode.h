#ifndef CORESCAPE_RUNTIME_JOB_ATTENTION_MODE_H_
#define CORESCAPE_RUNTIME_JOB_ATTENTION_MODE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "corescape/v1/job.pb.h"

// Where a job's core attention runs (AttentionSpec.mode), as job files and
// `corescape submit --attention-mode` spell it: the one list of its names.
namespace corescape::job {

// "colocated", "disaggregated", "in-place", in the order listings give them.
std::vector<std::string> AttentionModeNames();

// "colocated, disaggregated, in-place".
std::string AttentionModeNameList();

// A mode by its name (or "in_place"); INVALID_ARGUMENT listing the names
// otherwise.
absl::StatusOr<v1::AttentionMode> ParseAttentionMode(absl::string_view name);

}  // namespace corescape::job

#endif  // CORESCAPE_RUNTIME_JOB_ATTENTION_MODE_H_
