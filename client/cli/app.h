// The whole `corescape` command line as a function, so tests can run it in
// process (main.cc only calls it).
#ifndef CORESCAPE_CLIENT_CLI_APP_H_
#define CORESCAPE_CLIENT_CLI_APP_H_

namespace corescape::cli {

// Parses argv, runs one subcommand and returns its exit code (common.h).
// Output goes to std::cout and std::cerr.
int RunCorescapeCli(int argc, const char* const* argv);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_APP_H_
