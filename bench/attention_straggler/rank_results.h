#ifndef CORESCAPE_BENCH_ATTENTION_STRAGGLER_RANK_RESULTS_H_
#define CORESCAPE_BENCH_ATTENTION_STRAGGLER_RANK_RESULTS_H_

// What each worker and server process reports to the launcher: a small text
// file, one "key value value ..." line per field, written atomically when
// the process is done.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace corescape::bench {

struct WorkerResult {
  int worker = 0;
  // Per timed repeat: the core-attention wall time of this worker, and the
  // CPU time (user + system, all threads) the process used meanwhile.
  std::vector<double> forward_seconds, backward_seconds, cpu_seconds;
  // Per timed repeat: attention bytes sent + received (disaggregated).
  std::vector<double> bytes_moved;
  // Disaggregated: the planner's verdict on the micro-batch (current_plan()).
  double plan_imbalance = 0;               // modelled max/mean server time
  std::vector<double> plan_server_pairs;   // causal pairs per server
  double plan_tasks = 0;
  double plan_split_documents = 0;
};

struct ServerResult {
  int server = 0;
  // Per timed repeat: rebatching plus kernel wall time (ServerSessionStats),
  // and the process's CPU time (user + system, all threads, receiving and
  // sending included).
  std::vector<double> compute_seconds, cpu_seconds;
  double tasks = 0;       // kernel tasks over the whole run
  double query_rows = 0;
};

std::string EncodeWorkerResult(const WorkerResult& result);
std::string EncodeServerResult(const ServerResult& result);
absl::StatusOr<WorkerResult> DecodeWorkerResult(const std::string& text);
absl::StatusOr<ServerResult> DecodeServerResult(const std::string& text);

// File names inside a run directory.
std::string WorkerResultPath(const std::string& dir, int worker);
std::string ServerResultPath(const std::string& dir, int server);

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_ATTENTION_STRAGGLER_RANK_RESULTS_H_
