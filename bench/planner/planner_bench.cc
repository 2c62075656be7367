// Planner benchmark: corescape's planner against DistCA's published greedy
// (re-implemented in runtime/planner/distca_greedy.*) on identical inputs:
// DistCA's worked example, and per-rank batches of 65,536 tokens drawn from
// its shipped length sample dist_wlbllm at 8, 64 and 512 servers (one per
// rank, colocated: in-place mode). Reports max/mean server cost, bytes moved
// (bf16 Q + K/V prefixes sent once per destination), and planning time.
//
// Run: bazel run -c opt //bench/planner:planner_bench [-- --seeds=5]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <tuple>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "bench/bench_main.h"
#include "bench/planner/document_samples.h"
#include "runtime/planner/attention_planner.h"
#include "runtime/planner/distca_greedy.h"
#include "runtime/planner/plan_summary.h"

ABSL_FLAG(std::string, data_dir, "", "directory of distca_dist_wlbllm.json (default ../shared/data)");
ABSL_FLAG(int, seeds, 5, "sampled batches per scale");
ABSL_FLAG(int, repeats, 5, "timed runs per plan (median reported)");
ABSL_FLAG(std::string, scales, "8,64,512", "server counts");
ABSL_FLAG(double, distca_tolerance, 0.05, "DistCA greedy tolerance (its training script's)");
ABSL_FLAG(std::string, tolerances, "0.02,0.01", "corescape planner tolerances");

namespace corescape::bench {
namespace {

using planner::Plan;
using planner::PlanInput;

PlanInput InPlace(std::vector<std::vector<int64_t>> batches) {
  PlanInput input;
  input.model = {.hidden = 4096, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128,
                 .bytes_per_element = 2};
  for (int32_t w = 0; w < static_cast<int32_t>(batches.size()); ++w) {
    input.servers.push_back({.speed = 1.0, .colocated_worker = w});
  }
  input.worker_documents = std::move(batches);
  return input;
}

struct Timed {
  Plan plan;
  double ms = 0;  // median of the repeats
};

Timed Time(const std::function<absl::StatusOr<Plan>()>& run) {
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  std::vector<double> ms;
  Timed out;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Plan> plan = run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
    if (!plan.ok()) {
      std::fprintf(stderr, "planning failed: %s\n", plan.status().ToString().c_str());
      std::exit(1);
    }
    out.plan = *std::move(plan);
  }
  std::sort(ms.begin(), ms.end());
  out.ms = ms[ms.size() / 2];
  return out;
}

int64_t Tokens(const PlanInput& input) {
  int64_t tokens = 0;
  for (const auto& batch : input.worker_documents) {
    for (int64_t l : batch) tokens += l;
  }
  return tokens;
}

// K/V bytes sent more than once: for each document placed remotely on
// several servers, all prefixes but the longest. The cost of cutting a
// document across servers.
int64_t RepeatedKvBytes(const PlanInput& input, const Plan& plan) {
  std::map<std::pair<int32_t, int32_t>, std::pair<int64_t, int64_t>> sum_and_max;
  std::map<std::tuple<int32_t, int32_t, int32_t>, int64_t> prefix;  // (worker, doc, server)
  for (const planner::PlannedTask& t : plan.tasks) {
    if (input.servers[t.server].colocated_worker == t.worker) continue;
    int64_t& p = prefix[{t.worker, t.document, t.server}];
    p = std::max(p, t.q_end);
  }
  for (const auto& [key, p] : prefix) {
    auto& [sum, max] = sum_and_max[{std::get<0>(key), std::get<1>(key)}];
    sum += p;
    max = std::max(max, p);
  }
  int64_t repeated = 0;
  for (const auto& [key, v] : sum_and_max) repeated += v.first - v.second;
  return repeated * planner::KvBytesPerToken(input.model);
}

struct Row {
  std::string name;
  double tolerance;
  std::vector<Timed> runs;  // one per seed
  double repeated_kv = 0;   // mean over seeds
};

void PrintWorkedExample() {
  const PlanInput input = InPlace({{16384},
                                   {8192, 8192},
                                   {4096, 4096, 4096, 4096},
                                   {2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048}});
  std::printf("== DistCA's worked example (4 ranks, 16,384 tokens each; hidden 4096, 32 heads, 8 KV heads, bf16)\n");
  std::printf("| planner | tolerance | max/mean | bytes moved (MB) | tasks | plan time (ms) |\n");
  std::printf("|---|---|---|---|---|---|\n");
  auto print = [&](const char* name, double tol, const Timed& t) {
    std::printf("| %s | %.2f | %.4f | %.1f | %lld | %.3f |\n", name, tol, t.plan.imbalance,
                t.plan.bytes_moved / 1e6, static_cast<long long>(t.plan.stats.tasks), t.ms);
  };
  for (double tol : {0.1, 0.05}) {
    print("DistCA greedy", tol, Time([&] {
            return planner::PlanDistcaGreedy(input, {.tolerance = tol, .token_budget = 16384});
          }));
  }
  for (double tol : {0.05, 0.02, 0.01, 0.0}) {
    print("corescape", tol, Time([&] { return planner::PlanAttention(input, {.tolerance = tol}); }));
  }
  std::printf("\n");
}

}  // namespace

int RunBenchmark() {
  const std::string dir = DataDirectory(absl::GetFlag(FLAGS_data_dir));
  absl::StatusOr<std::vector<int64_t>> lengths = LoadLengths(dir + "/distca_dist_wlbllm.json");
  if (!lengths.ok()) {
    std::fprintf(stderr, "%s\n", lengths.status().ToString().c_str());
    return 1;
  }
  PrintWorkedExample();

  const int seeds = absl::GetFlag(FLAGS_seeds);
  std::vector<double> tolerances;
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_tolerances), ',')) {
    tolerances.push_back(std::stod(std::string(t)));
  }
  const double distca_tol = absl::GetFlag(FLAGS_distca_tolerance);
  std::printf("== Sampled batches: dist_wlbllm, 65,536 tokens per rank, lengths rounded up to 16, "
              "%d seeds per scale (max/mean: mean over seeds [worst]; bytes, tasks: mean; time: "
              "median of %d runs, mean over seeds)\n",
              seeds, absl::GetFlag(FLAGS_repeats));
  std::printf("| servers | docs | planner | tolerance | max/mean | bytes moved (MB) | KB/token | "
              "K/V repeats (MB) | split docs | tasks | plan time (ms) | bytes vs DistCA | time vs DistCA |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (absl::string_view scale_text : absl::StrSplit(absl::GetFlag(FLAGS_scales), ',')) {
    const int servers = std::stoi(std::string(scale_text));
    std::vector<Row> rows;
    rows.push_back({"DistCA greedy", distca_tol, {}});
    for (double t : tolerances) rows.push_back({"corescape", t, {}});
    double docs = 0, tokens = 0;
    for (int seed = 1; seed <= seeds; ++seed) {
      const PlanInput input = InPlace(SampleRankBatches(
          *lengths, {.ranks = servers, .tokens_per_rank = 65536, .round_to = 16,
                     .seed = static_cast<uint64_t>(seed)}));
      for (const auto& b : input.worker_documents) docs += b.size();
      tokens += Tokens(input);
      rows[0].runs.push_back(Time([&] {
        return planner::PlanDistcaGreedy(input, {.tolerance = distca_tol, .token_budget = 65536});
      }));
      for (size_t i = 1; i < rows.size(); ++i) {
        const double tol = rows[i].tolerance;
        rows[i].runs.push_back(Time([&] { return planner::PlanAttention(input, {.tolerance = tol}); }));
      }
      for (Row& row : rows) {
        row.repeated_kv += static_cast<double>(RepeatedKvBytes(input, row.runs.back().plan)) / seeds;
      }
    }
    double base_bytes = 0, base_ms = 0;
    for (const Row& row : rows) {
      double imbalance = 0, worst = 0, bytes = 0, split = 0, tasks = 0, ms = 0;
      for (const Timed& t : row.runs) {
        imbalance += t.plan.imbalance / seeds;
        worst = std::max(worst, t.plan.imbalance);
        bytes += static_cast<double>(t.plan.bytes_moved) / seeds;
        split += static_cast<double>(t.plan.stats.split_documents) / seeds;
        tasks += static_cast<double>(t.plan.stats.tasks) / seeds;
        ms += t.ms / seeds;
      }
      if (&row == &rows[0]) base_bytes = bytes, base_ms = ms;
      std::printf("| %d | %.0f | %s | %.2f | %.4f [%.5f] | %.0f | %.2f | %.0f | %.0f | %.0f | %.2f | %.3f | %.3f |\n",
                  servers, docs / seeds, row.name.c_str(), row.tolerance, imbalance, worst,
                  bytes / 1e6, bytes / (tokens / seeds) / 1e3, row.repeated_kv / 1e6, split, tasks, ms,
                  bytes / base_bytes, ms / base_ms);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace corescape::bench
