#include "runtime/base/daemon_init.h"

#include <cstdio>
#include <cstdlib>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "glog/logging.h"
#include "runtime/base/shutdown_signal.h"

namespace corescape {
namespace {

std::string& ProgramName() {
  static std::string* name = new std::string("corescape");
  return *name;
}

}  // namespace


std::vector<char*> InitDaemon(int argc, char** argv, const char* usage) {
  absl::SetProgramUsageMessage(usage);
  std::string path = argv[0];
  ProgramName() = path.substr(path.rfind('/') + 1);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  FLAGS_logtostderr = true;
  FLAGS_colorlogtostderr = false;
  google::InitGoogleLogging(argv[0]);
  InstallShutdownSignalHandlers();
  return positional;
}

void ExitWithFlagError(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n",
               ProgramName().c_str(), message.c_str());
  std::exit(2);
}

}  // namespace corescape
