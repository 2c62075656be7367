// Golden tests: every example job file, read like `corescape submit` reads
// it and resolved like the scheduler resolves it (runtime/job), against the
// checked-in rendering of the trainer configuration it trains with
// (examples/golden/<file>.trainer.json). A mismatch writes the new
// rendering to the test's undeclared outputs, to review and copy in.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/cli/parsing/job_spec_file.h"
#include "gtest/gtest.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/trainer_config.h"

namespace corescape::cli {
namespace {

namespace fs = std::filesystem;

std::string RunfilesPath(const std::string& relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/",
                      workspace != nullptr ? workspace : "", "/", relative);
}

std::string ReadOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

TEST(ExampleTrainerConfigTest, EveryExampleResolvesToItsGolden) {
  // Where `corescape submit` runs, with the examples' dataset
  // (.cache/fortunes) as `corescape data prepare` leaves it: resolving
  // checks that it exists.
  const fs::path work = fs::path(::testing::TempDir()) / "examples-work";
  fs::create_directories(work / ".cache" / "fortunes");
  std::ofstream((work / ".cache" / "fortunes" / "manifest.json").string()) << "{}";
  int examples = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(RunfilesPath("examples"))) {
    const std::string file = entry.path().filename().string();
    const std::string extension = entry.path().extension().string();
    if (extension != ".json" && extension != ".yaml") continue;
    ++examples;
    absl::StatusOr<v1::JobSpec> spec = ReadJobSpecFile(entry.path().string());
    ASSERT_TRUE(spec.ok()) << file << ": " << spec.status();
    ResolveJobSpecPaths(work.string(), &*spec);
    absl::StatusOr<job::ResolvedJobSpec> resolved = job::ResolveJobSpec(*spec);
    ASSERT_TRUE(resolved.ok()) << file << ": " << resolved.status();
    absl::StatusOr<train::TrainerConfig> config = job::TrainerConfigFromSpec(*resolved);
    ASSERT_TRUE(config.ok()) << file << ": " << config.status();
    // Paths as the example writes them, relative to where submit ran.
    const std::string actual =
        absl::StrReplaceAll(job::DescribeTrainerConfig(*config), {{work.string() + "/", ""}});
    const std::string golden_name = file + ".trainer.json";
    const std::string expected = ReadOrEmpty(RunfilesPath("examples/golden/" + golden_name));
    if (actual != expected) {
      if (const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
        std::ofstream(absl::StrCat(outputs, "/", golden_name)) << actual;
      }
    }
    EXPECT_EQ(actual, expected) << file << " no longer resolves to examples/golden/"
                                << golden_name;
  }
  EXPECT_GE(examples, 4);
}

}  // namespace
}  // namespace corescape::cli
