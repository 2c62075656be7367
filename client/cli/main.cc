// corescape: the operator CLI. Parses the command line, runs one subcommand
// and exits with a documented code (see common.h).
#include "client/cli/app.h"

int main(int argc, char** argv) {
  return corescape::cli::RunCorescapeCli(argc, argv);
}
