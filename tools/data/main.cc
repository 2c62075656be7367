// corescape-data: turns text corpora into token shards (prepare) and shows
// what a shard or dataset holds (inspect). Exit codes: 0 ok, 1 failure,
// 2 usage error.
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "glog/logging.h"
#include "tools/data/command_line.h"
#include "tools/data/commands.h"

namespace corescape::data::tools {
namespace {

constexpr char kUsage[] =
    "usage:\n"
    "  corescape-data prepare --input=PATH[,PATH...] --output=DIR [--delimiter=%]\n"
    "                 [--validation_fraction=0.05] [--seed=1] [--tokenizer=byte|gpt2\n"
    "                 --gpt2_encoder=encoder.json --gpt2_vocab=vocab.bpe]\n"
    "  corescape-data inspect SHARD|DATASET_DIR [--documents=3] [--max_chars=400]\n"
    "exit codes: 0 ok, 1 failure, 2 usage error\n";

void PrintUsage(FILE* to) {
  std::fputs(kUsage, to);
  std::fprintf(to, "\nprepare flags:\n%s", DescribeFlags(kPrepareFlags).c_str());
  std::fprintf(to, "\ninspect flags:\n%s", DescribeFlags(kInspectFlags).c_str());
}

}  // namespace

int Fail(int code, const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "corescape-data: error: %s\n", message.c_str());
  if (code == kExitUsage) std::fprintf(stderr, "Run 'corescape-data --help' for usage.\n");
  return code;
}

int Main(int argc, char** argv) {
  FLAGS_logtostderr = true;
  FLAGS_colorlogtostderr = false;
  google::InitGoogleLogging(argv[0]);
  if (argc < 2) {
    PrintUsage(stderr);
    return kExitUsage;
  }
  std::string command = argv[1];
  if (command == "help" || command == "--help" || command == "-h") {
    PrintUsage(stdout);
    return kExitOk;
  }
  const std::set<std::string>* allowed = command == "prepare"   ? &kPrepareFlags
                                         : command == "inspect" ? &kInspectFlags
                                                                : nullptr;
  if (allowed == nullptr) return Fail(kExitUsage, "unknown command \"" + command + "\"");
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      PrintUsage(stdout);
      return kExitOk;
    }
  }
  absl::StatusOr<std::vector<std::string>> positional = ParseFlags(argc, argv, 2, *allowed);
  if (!positional.ok()) {
    return Fail(kExitUsage, command + ": " + std::string(positional.status().message()));
  }
  return command == "prepare" ? RunPrepare(*positional) : RunInspect(*positional);
}

}  // namespace corescape::data::tools

int main(int argc, char** argv) { return corescape::data::tools::Main(argc, argv); }
