// Linked into fuzz targets under --config=fuzz only. libFuzzer calls
// LLVMFuzzerInitialize before fuzzing; with CORESCAPE_FUZZ_WRITE_SEEDS=DIR in
// the environment the target writes its FuzzSeeds() there and exits, so
// scripts/fuzz.sh gets the seed corpus from the same binary.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const char* dir = std::getenv("CORESCAPE_FUZZ_WRITE_SEEDS");
  if (dir == nullptr || *dir == '\0') return 0;
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  const std::vector<std::string> seeds = corescape::fuzz::FuzzSeeds();
  for (size_t s = 0; s < seeds.size(); ++s) {
    const std::string path = std::string(dir) + "/seed-" + std::to_string(s);
    std::ofstream out(path, std::ios::binary);
    out << seeds[s];
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      std::exit(1);
    }
  }
  std::printf("wrote %zu seeds to %s\n", seeds.size(), dir);
  std::exit(0);
}
