// Job files: a corescape.v1.JobSpec as JSON (protobuf's JSON mapping) or
// as the YAML subset of yaml_subset.h, and the command-line flags that
// override what a file says.
//
// Field names may be the proto names (eval_interval_steps) or lowerCamel
// (evalIntervalSteps); enum values are matched case-insensitively
// ("disaggregated", "IN_PLACE"); 64-bit numbers may be numbers or strings.
// JSON files may carry // and /* */ comments. An unknown field, a value of
// the wrong type, or the same field spelled twice is an error naming the
// field and the file.
#ifndef CORESCAPE_CLIENT_CLI_PARSING_JOB_SPEC_FILE_H_
#define CORESCAPE_CLIENT_CLI_PARSING_JOB_SPEC_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "corescape/v1/job.pb.h"

namespace corescape::cli {

// INVALID_ARGUMENT "SOURCE: why" on any problem.
absl::StatusOr<corescape::v1::JobSpec> ParseJobSpecJson(
    absl::string_view text, absl::string_view source);
absl::StatusOr<corescape::v1::JobSpec> ParseJobSpecYaml(
    absl::string_view text, absl::string_view source);

// JSON for *.json, YAML for *.yaml and *.yml; otherwise JSON when the
// first non-blank character is '{', else YAML. NOT_FOUND when the file is
// missing, FAILED_PRECONDITION when it cannot be read.
absl::StatusOr<corescape::v1::JobSpec> ReadJobSpecFile(const std::string& path);

// The job flags of `corescape submit`; a set field replaces the file's.
struct JobSpecOverrides {
  std::optional<std::string> name;
  std::optional<std::string> model;              // ModelSpec.preset
  std::vector<std::string> train_data;           // empty: keep the file's
  std::vector<std::string> validation_data;      // empty: keep the file's
  std::optional<int32_t> seq_len;
  std::optional<int32_t> micro_batch;
  std::optional<int32_t> grad_accum;
  std::optional<int64_t> steps;
  std::optional<std::string> optimizer;          // optim::OptimizerNames()
  std::optional<double> lr;
  std::optional<double> density;                 // scape.density
  std::optional<int32_t> workers;
  std::optional<int32_t> min_workers;
  std::optional<int64_t> eval_interval;
  std::optional<std::string> checkpoint_dir;
  std::optional<int64_t> checkpoint_interval;
  std::optional<std::string> attention_mode;     // colocated | disaggregated | in-place
  std::optional<int32_t> attention_servers;
  std::optional<uint64_t> seed;
  std::optional<std::string> device;             // job::ParseJobDevice

  bool empty() const;
};

// Writes every set override into `spec`. --optimizer sets optimizer.name
// (any name of the optimizer registry); --density sets scape.density;
// --device sets the job's device (cpu or cuda). Data
// lists are split at commas, empty entries dropped. INVALID_ARGUMENT for an
// unknown optimizer, attention mode or device. Defaults are the scheduler's to fill
// (runtime/job), so the spec says no more than was given.
absl::Status ApplyJobSpecOverrides(const JobSpecOverrides& overrides,
                                   corescape::v1::JobSpec* spec);

// Makes the relative paths of the spec (data shards, checkpoint directory)
// absolute against `base_dir` (the directory `corescape submit` runs in):
// the daemons that read them run elsewhere. Paths with "://" are left as
// they are.
void ResolveJobSpecPaths(const std::string& base_dir,
                         corescape::v1::JobSpec* spec);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_PARSING_JOB_SPEC_FILE_H_
