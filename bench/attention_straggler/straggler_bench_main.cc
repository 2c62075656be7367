// Straggler removal on real processes: per-worker core-attention time, and
// its spread across workers, colocated vs disaggregated, on a skewed batch
// (worker 0 one long document, the others many short ones; every worker the
// same number of tokens). One binary, three roles:
//
//   --role=launcher (default)  starts W worker processes (colocated), then W
//       workers + S attention servers (disaggregated), each a process of
//       this binary on loopback, and prints the report;
//   --role=worker / --role=server  one rank (started by the launcher).
//
// Run: bench/attention_straggler/run.sh (see docs/benchmarks.md).
#include <glog/logging.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bench/attention_straggler/bench_config.h"
#include "bench/attention_straggler/rank_roles.h"
#include "bench/attention_straggler/straggler_launcher.h"

ABSL_FLAG(std::string, role, "launcher", "launcher | worker | server");
ABSL_FLAG(std::string, mode, "colocated", "worker role: colocated | disaggregated");
ABSL_FLAG(int, rank, 0, "worker: its index; server: its index among the servers");
ABSL_FLAG(std::string, run_dir, "",
          "worker/server: where ranks meet and write results; launcher: keep everything "
          "here (default: a temporary directory, removed afterwards)");

ABSL_FLAG(int, workers, 2, "W: worker processes");
ABSL_FLAG(int, servers, -1, "S: attention servers in disaggregated mode (default: W)");
ABSL_FLAG(int64_t, tokens_per_worker, 2048, "tokens in every worker's micro-batch");
ABSL_FLAG(int64_t, short_document, 128, "document length of workers 1..W-1");
ABSL_FLAG(int, heads, 8, "query heads (default: the small preset's)");
ABSL_FLAG(int, kv_heads, 4, "key/value heads");
ABSL_FLAG(int, head_dim, 64, "head dimension");
ABSL_FLAG(int, layers, 4, "layers: forward of each, then backward of each");
ABSL_FLAG(int, warmup, 1, "untimed repeats first");
ABSL_FLAG(int, repeats, 3, "timed repeats");
ABSL_FLAG(int, threads, 1, "kernel threads per colocated worker or attention server");
ABSL_FLAG(double, tolerance, 0.05, "planner tolerance (max/mean server load - 1)");
ABSL_FLAG(bool, keep_qkv_for_backward, true, "servers keep Q/K/V/O/LSE for backward");
ABSL_FLAG(uint64_t, seed, 1, "random Q/K/V/dO");

ABSL_FLAG(bool, pin, true, "launcher: pin each computing process to its own CPU");
ABSL_FLAG(int, rounds, 1, "launcher: run colocated then disaggregated this many times");
ABSL_FLAG(int, timeout_s, 540, "launcher: limit per group of processes; ranks: wait limit");
ABSL_FLAG(std::string, summary_json, "", "launcher: also write the figures here as JSON");
ABSL_FLAG(double, max_error, 1e-5,
          "launcher: fail when disaggregated outputs differ from colocated by more (relative)");

namespace corescape::bench {
namespace {

StragglerConfig ConfigFromFlags() {
  StragglerConfig c;
  c.workers = absl::GetFlag(FLAGS_workers);
  c.servers = absl::GetFlag(FLAGS_servers) < 0 ? c.workers : absl::GetFlag(FLAGS_servers);
  c.tokens_per_worker = absl::GetFlag(FLAGS_tokens_per_worker);
  c.short_document = absl::GetFlag(FLAGS_short_document);
  c.n_heads = absl::GetFlag(FLAGS_heads);
  c.n_kv_heads = absl::GetFlag(FLAGS_kv_heads);
  c.head_dim = absl::GetFlag(FLAGS_head_dim);
  c.layers = absl::GetFlag(FLAGS_layers);
  c.warmup = absl::GetFlag(FLAGS_warmup);
  c.repeats = absl::GetFlag(FLAGS_repeats);
  c.threads = absl::GetFlag(FLAGS_threads);
  c.tolerance = absl::GetFlag(FLAGS_tolerance);
  c.keep_qkv_for_backward = absl::GetFlag(FLAGS_keep_qkv_for_backward);
  c.seed = absl::GetFlag(FLAGS_seed);
  return c;
}

std::string SelfPath(const char* argv0) {
  std::vector<char> buffer(4096);
  const ssize_t n = readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  return n > 0 ? std::string(buffer.data(), n) : std::string(argv0);
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  const StragglerConfig config = ConfigFromFlags();
  const std::string role = absl::GetFlag(FLAGS_role);
  const absl::Duration timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_s));
  absl::Status status;
  if (role == "launcher") {
    LauncherOptions options;
    options.binary = SelfPath(argv[0]);
    options.run_dir = absl::GetFlag(FLAGS_run_dir);
    options.pin = absl::GetFlag(FLAGS_pin);
    options.rounds = absl::GetFlag(FLAGS_rounds);
    options.timeout = timeout;
    options.summary_json = absl::GetFlag(FLAGS_summary_json);
    options.max_error = absl::GetFlag(FLAGS_max_error);
    std::vector<std::string> command(argv, argv + argc);
    options.command = absl::StrJoin(command, " ");
    status = RunLauncher(config, options);
  } else {
    if (absl::Status s = config.Validate(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
    RankOptions options{absl::GetFlag(FLAGS_run_dir), timeout};
    const std::string mode = absl::GetFlag(FLAGS_mode);
    if (role == "worker" && (mode == "colocated" || mode == "disaggregated")) {
      status = RunWorker(config,
                         mode == "colocated" ? AttentionMode::kColocated
                                             : AttentionMode::kDisaggregated,
                         absl::GetFlag(FLAGS_rank), options);
    } else if (role == "server") {
      status = RunServer(config, absl::GetFlag(FLAGS_rank), options);
    } else {
      std::fprintf(stderr, "unknown --role=%s / --mode=%s\n", role.c_str(), mode.c_str());
      return 2;
    }
  }
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", role.c_str(), status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace corescape::bench

int main(int argc, char** argv) { return corescape::bench::Main(argc, argv); }
