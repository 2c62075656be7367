// Plans shipped ahead: what adopting the scheduler's plan takes off each
// participant's critical path at the forward of layer 0. On the planner
// benchmark's sampled batches (DistCA's dist_wlbllm, 65,536 tokens per rank,
// lengths rounded up to 16, seeds 1..--seeds) with as many dedicated
// attention servers as workers, it times per micro-batch
//   (a) PlanMicroBatch: planner::PlanAttention, then the layout — what every
//       participant ran before the scheduler shipped its plans;
//   (b) AdoptMicroBatchPlan with the tasks of a plan made beforehand: the
//       coverage check (planner::SummarizePlan), then the same layout;
// and, for reference, (b)'s coverage check alone (the rest of (b) is the
// layout) and decoding the shipped plan from worker 0's header. The runs
// alternate; each is the median of --repeats runs, argument copies made
// before the clock starts. Fails loudly if the adopted (or decoded) plan's
// tasks differ from the planned ones.
//
// Run: bazel run -c opt //bench/planner:plan_adoption_bench [-- --seeds=5 --repeats=9]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "bench/bench_main.h"
#include "bench/planner/document_samples.h"
#include "runtime/attention/micro_batch_plan.h"
#include "runtime/attention/shipped_plan.h"
#include "runtime/planner/plan_summary.h"

ABSL_FLAG(std::string, data_dir, "", "directory of distca_dist_wlbllm.json (default ../shared/data)");
ABSL_FLAG(int, seeds, 5, "sampled batches per scale");
ABSL_FLAG(int, repeats, 9, "timed runs of each call per batch (median reported)");
ABSL_FLAG(std::string, scales, "8,64,512", "server counts (workers = servers)");
ABSL_FLAG(double, tolerance, 0.05, "planner tolerance (a job's default attention.tolerance)");

namespace corescape::bench {
namespace {

using attention::MicroBatchPlan;
using Clock = std::chrono::steady_clock;
using Documents = std::vector<std::vector<int64_t>>;

template <typename T>
T OrDie(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) {
    std::fprintf(stderr, "%s failed: %s\n", what, value.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(value);
}

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double Median(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The model the planner bench plans for: hidden 4096, 32 heads, 8 KV heads.
const kernels::AttentionShape kShape{32, 8, 128, 1.0f / std::sqrt(128.0f)};

struct BatchTimes {
  int64_t tasks = 0;
  double plan_ms = 0, adopt_ms = 0, check_ms = 0, decode_ms = 0;  // medians
};

// Fails loudly unless `what` produced the tasks of the plan made ahead.
void ExpectTasks(const std::vector<planner::PlannedTask>& tasks,
                 const std::vector<planner::PlannedTask>& ahead, const char* what, int servers) {
  if (tasks != ahead) {
    std::fprintf(stderr, "%s: %zu tasks differ from the %zu planned ahead at %d servers\n", what,
                 tasks.size(), ahead.size(), servers);
    std::exit(1);
  }
}

BatchTimes TimeBatch(const Documents& documents, const attention::PlanOptions& options,
                     int repeats) {
  // The plan made beforehand (the scheduler's, shipped by worker 0).
  const MicroBatchPlan ahead =
      OrDie(attention::PlanMicroBatch(documents, kShape, options), "planning ahead");
  const std::vector<planner::PlannedTask>& tasks = ahead.plan.tasks;
  const std::vector<int64_t> words = attention::EncodeShippedPlan({.step = 1, .tasks = tasks});
  // The planner's input as AdoptMicroBatchPlan builds it (dedicated servers
  // of equal speed, fp32 exchanges), to time its coverage check alone.
  planner::PlanInput input;
  input.worker_documents = documents;
  input.servers.assign(options.servers, planner::AttentionServer{});
  input.model = {.hidden = 4096, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128,
                 .bytes_per_element = sizeof(float)};
  std::vector<double> plan_ms, adopt_ms, check_ms, decode_ms;
  for (int i = 0; i < repeats; ++i) {
    Documents copy = documents;
    auto start = Clock::now();
    auto planned = attention::PlanMicroBatch(std::move(copy), kShape, options);
    plan_ms.push_back(MsSince(start));
    ExpectTasks(OrDie(std::move(planned), "PlanMicroBatch").plan.tasks, tasks, "PlanMicroBatch",
                options.servers);

    copy = documents;
    std::vector<planner::PlannedTask> shipped = tasks;
    start = Clock::now();
    auto adopted = attention::AdoptMicroBatchPlan(std::move(copy), kShape, options,
                                                  std::move(shipped));
    adopt_ms.push_back(MsSince(start));
    ExpectTasks(OrDie(std::move(adopted), "AdoptMicroBatchPlan").plan.tasks, tasks,
                "the adopted plan", options.servers);

    shipped = tasks;
    start = Clock::now();
    absl::Status valid = planner::ValidatePlanInput(input);
    auto summary = planner::SummarizePlan(input, std::move(shipped));
    check_ms.push_back(MsSince(start));
    if (!valid.ok()) summary = valid;
    OrDie(std::move(summary), "the coverage check");

    start = Clock::now();
    auto decoded = attention::DecodeShippedPlan(words, "bench");
    decode_ms.push_back(MsSince(start));
    ExpectTasks(OrDie(std::move(decoded), "DecodeShippedPlan").tasks, tasks, "the decoded plan",
                options.servers);
  }
  return {static_cast<int64_t>(tasks.size()), Median(plan_ms), Median(adopt_ms),
          Median(check_ms), Median(decode_ms)};
}

}  // namespace

int RunBenchmark() {
  const std::string dir = DataDirectory(absl::GetFlag(FLAGS_data_dir));
  const std::vector<int64_t> lengths =
      OrDie(LoadLengths(dir + "/distca_dist_wlbllm.json"), "loading the length sample");
  const int seeds = std::max(1, absl::GetFlag(FLAGS_seeds));
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  attention::PlanOptions options;
  options.tolerance = absl::GetFlag(FLAGS_tolerance);
  std::printf("== Per micro-batch at the forward of layer 0: plan it (a) or adopt the shipped "
              "plan (b). dist_wlbllm, 65,536 tokens per rank, lengths rounded up to 16, "
              "workers = dedicated servers, tolerance %.2f; %d seeds per scale, median of %d "
              "runs each, mean over seeds; a/b: of the means [per-seed range]\n",
              options.tolerance, seeds, repeats);
  std::printf("| servers | docs | tasks | (a) PlanMicroBatch (ms) | (b) AdoptMicroBatchPlan (ms) "
              "| a/b | a − b (ms) | of b: coverage check (ms) | decode shipped plan (ms) |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (absl::string_view scale : absl::StrSplit(absl::GetFlag(FLAGS_scales), ',')) {
    options.servers = std::stoi(std::string(scale));
    double docs = 0, tasks = 0, plan_ms = 0, adopt_ms = 0, check_ms = 0, decode_ms = 0;
    double min_ratio = 1e300, max_ratio = 0;
    for (int seed = 1; seed <= seeds; ++seed) {
      const Documents documents = SampleRankBatches(
          lengths, {.ranks = options.servers, .tokens_per_rank = 65536, .round_to = 16,
                    .seed = static_cast<uint64_t>(seed)});
      for (const auto& d : documents) docs += static_cast<double>(d.size()) / seeds;
      const BatchTimes t = TimeBatch(documents, options, repeats);
      tasks += static_cast<double>(t.tasks) / seeds;
      plan_ms += t.plan_ms / seeds;
      adopt_ms += t.adopt_ms / seeds;
      check_ms += t.check_ms / seeds;
      decode_ms += t.decode_ms / seeds;
      min_ratio = std::min(min_ratio, t.plan_ms / t.adopt_ms);
      max_ratio = std::max(max_ratio, t.plan_ms / t.adopt_ms);
    }
    std::printf("| %d | %.0f | %.0f | %.3f | %.3f | %.2f [%.2f–%.2f] | %.3f | %.3f | %.3f |\n",
                options.servers, docs, tasks, plan_ms, adopt_ms, plan_ms / adopt_ms, min_ratio,
                max_ratio, plan_ms - adopt_ms, check_ms, decode_ms);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace corescape::bench
