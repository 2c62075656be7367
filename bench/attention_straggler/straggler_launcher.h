#ifndef CORESCAPE_BENCH_ATTENTION_STRAGGLER_STRAGGLER_LAUNCHER_H_
#define CORESCAPE_BENCH_ATTENTION_STRAGGLER_STRAGGLER_LAUNCHER_H_

// The launcher: for each round, runs the colocated mode (W worker
// processes) and then the disaggregated mode (W workers + S servers), each
// a fresh group of processes of this same binary on loopback, then prints
// the report and optionally writes it as JSON.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/attention_straggler/bench_config.h"

namespace corescape::bench {

struct LauncherOptions {
  std::string binary;        // this program, started with --role=worker|server
  std::string run_dir;       // empty: a fresh directory under $TMPDIR, removed afterwards
  bool pin = true;           // one CPU per computing process (see straggler_launcher.cc)
  int rounds = 1;            // colocated then disaggregated, this many times
  absl::Duration timeout = absl::Minutes(9);  // per process group
  std::string summary_json;  // non-empty: write the figures here as JSON
  double max_error = 1e-5;   // fail when the outputs differ more (relative)
  std::string command;       // for the report
};

absl::Status RunLauncher(const StragglerConfig& config, const LauncherOptions& options);

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_ATTENTION_STRAGGLER_STRAGGLER_LAUNCHER_H_
