// Seeds of the job-file fuzzers: well-formed job files, as JSON (made by
// protobuf's encoder from a spec that sets every section) and as YAML.
#ifndef CORESCAPE_CLIENT_CLI_PARSING_JOB_SPEC_FUZZ_SEEDS_H_
#define CORESCAPE_CLIENT_CLI_PARSING_JOB_SPEC_FUZZ_SEEDS_H_

#include <string>
#include <vector>

#include "corescape/v1/job.pb.h"

namespace corescape::cli {

std::vector<std::string> JobSpecJsonSeeds();
std::vector<std::string> JobSpecYamlSeeds();

// What the scheduler does with a parsed spec: its defaults, then its checks.
// Run on every spec a fuzzer parses, so their bounds are fuzzed too.
void ApplyAndValidate(corescape::v1::JobSpec spec);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_PARSING_JOB_SPEC_FUZZ_SEEDS_H_
