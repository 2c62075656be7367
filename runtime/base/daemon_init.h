#ifndef CORESCAPE_RUNTIME_BASE_DAEMON_INIT_H_
#define CORESCAPE_RUNTIME_BASE_DAEMON_INIT_H_

#include <string>
#include <vector>

namespace corescape {

// Common start of every daemon's main(): parses absl flags (exits with a
// usage message on unknown flags), sets glog up to log to stderr (systemd
// and `cluster up` capture it), installs SIGTERM/SIGINT handling.
// Returns the positional arguments.
std::vector<char*> InitDaemon(int argc, char** argv, const char* usage);

// Prints "<program>: <message>" to stderr and exits with status 2: for flag
// values that fail validation at start-up.
[[noreturn]] void ExitWithFlagError(const std::string& message);

}  // namespace corescape

#endif  // CORESCAPE_RUNTIME_BASE_DAEMON_INIT_H_
