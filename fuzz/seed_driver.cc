// main() of a fuzz target outside libFuzzer builds.
//   TARGET [FILE|DIR ...]
// runs every seed, every given file (and the files in given directories),
// and deterministic mutations of each seed: every truncation up to 4 KiB,
// and each byte of the first 1 KiB flipped to 0x00, 0xff and its complement.
// Fails if any unmutated seed is refused: seeds are made by the format's own
// encoder, so a refused one means the fuzzer no longer reaches the parser's
// depths.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"

namespace {

namespace fs = std::filesystem;

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

int64_t RunMutations(const std::string& seed) {
  int64_t runs = 0;
  const size_t truncations = std::min<size_t>(seed.size(), 4096);
  for (size_t n = 0; n < truncations; ++n, ++runs) Run(seed.substr(0, n));
  const size_t flips = std::min<size_t>(seed.size(), 1024);
  std::string mutated = seed;
  for (size_t i = 0; i < flips; ++i) {
    const char original = mutated[i];
    for (char replacement : {'\0', static_cast<char>(0xff), static_cast<char>(~original)}) {
      mutated[i] = replacement;
      Run(mutated);
      ++runs;
    }
    mutated[i] = original;
  }
  return runs;
}

bool ReadFile(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      std::fprintf(stderr, "unknown flag %s (this driver takes files and directories only)\n", arg.c_str());
      return 2;
    }
    paths.emplace_back(arg);
  }

  const std::vector<std::string> seeds = corescape::fuzz::FuzzSeeds();
  for (const std::string& seed : seeds) Run(seed);
  const int64_t accepted = corescape::fuzz::AcceptedCount();
  int64_t runs = static_cast<int64_t>(seeds.size());
  for (const std::string& seed : seeds) runs += RunMutations(seed);
  int64_t files = 0;
  for (const fs::path& path : paths) {
    std::vector<fs::path> inputs;
    if (fs::is_directory(path)) {
      for (const auto& entry : fs::directory_iterator(path)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else {
      inputs.push_back(path);
    }
    for (const fs::path& input : inputs) {
      std::string bytes;
      if (!ReadFile(input, &bytes)) {
        std::fprintf(stderr, "cannot read %s\n", input.c_str());
        return 1;
      }
      Run(bytes);
      ++files;
      ++runs;
    }
  }
  std::printf("%lld inputs run (%zu seeds, %lld of them accepted; %lld files); no crash\n",
              static_cast<long long>(runs), seeds.size(), static_cast<long long>(accepted),
              static_cast<long long>(files));
  if (accepted != static_cast<int64_t>(seeds.size())) {
    std::fprintf(stderr, "only %lld of %zu seeds accepted: the seeds no longer match the parser\n",
                 static_cast<long long>(accepted), seeds.size());
    return 1;
  }
  return 0;
}
