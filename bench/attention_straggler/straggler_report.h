#ifndef CORESCAPE_BENCH_ATTENTION_STRAGGLER_STRAGGLER_REPORT_H_
#define CORESCAPE_BENCH_ATTENTION_STRAGGLER_STRAGGLER_REPORT_H_

// Turns the processes' results into the benchmark's figures: per-worker
// core-attention time, its spread across workers, the step time (the
// slowest worker) for each mode, and their ratio.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/attention_straggler/bench_config.h"
#include "bench/attention_straggler/rank_results.h"

namespace corescape::bench {

double Median(std::vector<double> values);

struct ModeSummary {
  AttentionMode mode = AttentionMode::kColocated;
  // Per worker, medians over the timed repeats, seconds; worker_cpu is the
  // process's CPU time meanwhile.
  std::vector<double> worker_forward, worker_backward, worker_total, worker_cpu;
  // Per timed repeat: the slowest worker's forward + backward.
  std::vector<double> step_per_repeat;
  double step = 0;             // median of step_per_repeat
  // The fastest repeat: other processes on the machine only ever add time,
  // so on a shared machine this is the closer to dedicated cores.
  double step_best = 0;
  double spread_max_min = 0;   // of worker_total
  double spread_max_mean = 0;
  // Median over repeats of the CPU time all processes of the mode used.
  double cpu_per_step = 0;
  // The step on dedicated cores, estimated from CPU times (insensitive to
  // other load on the machine): colocated, the slowest worker's CPU time;
  // disaggregated, the slowest server's plus the slowest worker's (the
  // workers gather, send, receive and scatter while the servers wait, and
  // the other way round). A model: it assumes no process ever waits for a
  // CPU and counts transfer latency as the CPU time spent on it.
  double cpu_step_estimate = 0;
  // Disaggregated only (besides plan_imbalance).
  std::vector<double> server_compute;  // per server, median over repeats (wall)
  std::vector<double> server_cpu;      // per server, median over repeats
  double server_spread_max_min = 0;
  // Disaggregated: the planner's modelled max/mean server load; colocated:
  // max/mean causal pairs over the workers (what each worker must compute).
  double plan_imbalance = 0;
  std::vector<double> plan_server_pairs;
  double plan_split_documents = 0;
  double bytes_per_worker_step = 0;    // median over workers and repeats
};

// Results of one mode; with several rounds, each worker's (and server's)
// repeats of every round, concatenated in round order.
absl::StatusOr<ModeSummary> Summarize(const StragglerConfig& config, AttentionMode mode,
                                      const std::vector<WorkerResult>& workers,
                                      const std::vector<ServerResult>& servers);

struct OutputComparison {
  double max_relative_error = 0;  // max over workers and tensors
  std::string worst;              // "worker 0 d_k"
};

// max |disaggregated - colocated| / max |colocated| per tensor, from the
// files the workers of each mode wrote into their run directory
// (attention_step.h).
absl::StatusOr<OutputComparison> CompareOutputs(const StragglerConfig& config,
                                                const std::string& colocated_dir,
                                                const std::string& disaggregated_dir);

struct ReportContext {
  std::string command;     // how it was run
  std::string placement;   // how processes were put on CPUs
  double load_before = 0;  // 1-minute load average before / after
  double load_after = 0;
};

// The configuration, a per-worker table, a per-mode table and the ratio.
std::string FormatReport(const StragglerConfig& config, const ModeSummary& colocated,
                         const ModeSummary& disaggregated, const OutputComparison& comparison,
                         const ReportContext& context);
// The same figures as one JSON object (for the smoke test and scripts).
std::string FormatSummaryJson(const StragglerConfig& config, const ModeSummary& colocated,
                              const ModeSummary& disaggregated,
                              const OutputComparison& comparison);

}  // namespace corescape::bench

#endif  // CORESCAPE_BENCH_ATTENTION_STRAGGLER_STRAGGLER_REPORT_H_
