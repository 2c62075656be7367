// Fuzzes job files as YAML (what `corescape submit` reads), and the
// scheduler's defaults and checks on every spec that parses.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/cli/parsing/job_spec_file.h"
#include "client/cli/parsing/job_spec_fuzz_seeds.h"
#include "fuzz/fuzz_target.h"

bool corescape::fuzz::ParseFuzzInput(absl::string_view input) {
  auto spec = corescape::cli::ParseJobSpecYaml(input, "fuzz.yaml");
  if (!spec.ok()) return false;
  corescape::cli::ApplyAndValidate(*std::move(spec));
  return true;
}

namespace corescape::fuzz {

std::vector<std::string> FuzzSeeds() { return cli::JobSpecYamlSeeds(); }

}  // namespace corescape::fuzz
