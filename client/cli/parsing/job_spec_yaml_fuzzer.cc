// Fuzzes job files as YAML (what `corescape submit` reads), and the
// scheduler's defaults and checks on every spec that parses.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/cli/parsing/job_spec_file.h"
#include "client/cli/parsing/job_spec_fuzz_seeds.h"
#include "tools/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = corescape::cli::ParseJobSpecYaml(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  if (!spec.ok()) return 0;
  corescape::fuzz::NoteAccepted();
  corescape::cli::ApplyAndValidate(*std::move(spec));
  return 0;
}

namespace corescape::fuzz {

std::vector<std::string> FuzzSeeds() { return cli::JobSpecYamlSeeds(); }

}  // namespace corescape::fuzz
