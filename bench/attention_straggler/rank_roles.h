#ifndef CORESCAPE_BENCH_ATTENTION_STRAGGLER_RANK_ROLES_H_
#define CORESCAPE_BENCH_ATTENTION_STRAGGLER_RANK_ROLES_H_

// The two kinds of process the launcher starts. Each publishes its UCX
// transport address as <run_dir>/rank<R>.addr, waits for everyone else's,
// forms its communicators, runs, and writes its result file
// (rank_results.h) into run_dir.
//
//   worker w (rank w):  a data-parallel communicator over the W workers
//     (a barrier before every repeat, as the step's gradient all-reduce
//     would synchronise them), and in disaggregated mode the attention
//     communicator over W workers + S servers, wrapped in
//     DisaggregatedCoreAttention. Colocated: LocalCoreAttention.
//   server s (rank W+s): AttentionServerSession on the attention
//     communicator, timing its compute per repeat.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/attention_straggler/bench_config.h"

namespace corescape::bench {

struct RankOptions {
  std::string run_dir;
  absl::Duration timeout = absl::Seconds(300);  // rendezvous and every wait
};

absl::Status RunWorker(const StragglerConfig& config, AttentionMode mode, int worker,
                       const RankOptions& options);
absl::Status RunServer(const StragglerConfig& config, int server, const RankOptions& options);

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_ATTENTION_STRAGGLER_RANK_ROLES_H_
