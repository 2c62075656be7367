#include "bench/attention_straggler/straggler_launcher.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/attention_straggler/process_group.h"
#include "bench/attention_straggler/rank_results.h"
#include "bench/attention_straggler/straggler_report.h"
#include "runtime/base/atomic_file.h"

namespace corescape::bench {
namespace {

// Placement: every process that computes attention gets a CPU of its own
// (as far as there are CPUs): colocated worker w -> CPU w, disaggregated
// server s -> CPU s. Disaggregated workers only gather/scatter rows and
// wait for the servers, so they are not pinned. With W = S both modes keep
// the same number of processes computing on the same CPUs.
int CpuFor(const std::vector<int>& cpus, int index, bool pin) {
  return pin ? cpus[index % cpus.size()] : -1;
}

std::string DescribePlacement(const std::vector<int>& cpus, bool pin) {
  if (!pin) return absl::StrCat("unpinned, ", cpus.size(), " CPUs");
  return absl::StrCat("pinned, ", cpus.size(),
                      " CPUs: colocated worker w on CPU w mod ", cpus.size(),
                      "; disaggregated server s on CPU s mod ", cpus.size(),
                      ", disaggregated workers unpinned (they wait on the servers)");
}

std::vector<ChildSpec> ChildrenOf(const StragglerConfig& config, AttentionMode mode,
                                  const std::string& dir, const LauncherOptions& options,
                                  const std::vector<int>& cpus) {
  const bool disaggregated = mode == AttentionMode::kDisaggregated;
  auto spec = [&](const std::string& role, int rank, int cpu) {
    ChildSpec child;
    child.name = absl::StrCat(ModeName(mode), " ", role, " ", rank);
    child.argv = {options.binary, absl::StrCat("--role=", role),
                  absl::StrCat("--mode=", ModeName(mode)), absl::StrCat("--rank=", rank),
                  absl::StrCat("--run_dir=", dir)};
    for (const std::string& flag : config.AsFlags()) child.argv.push_back(flag);
    child.log_path = absl::StrCat(dir, "/", role, rank, ".log");
    child.cpu = cpu;
    return child;
  };
  std::vector<ChildSpec> children;
  for (int w = 0; w < config.workers; ++w) {
    children.push_back(spec("worker", w, disaggregated ? -1 : CpuFor(cpus, w, options.pin)));
  }
  if (disaggregated) {
    for (int s = 0; s < config.servers; ++s) {
      children.push_back(spec("server", s, CpuFor(cpus, s, options.pin)));
    }
  }
  return children;
}

void AppendRepeats(std::vector<double>& all, const std::vector<double>& round) {
  all.insert(all.end(), round.begin(), round.end());
}

void AppendWorkerRepeats(WorkerResult& all, const WorkerResult& round) {
  AppendRepeats(all.forward_seconds, round.forward_seconds);
  AppendRepeats(all.backward_seconds, round.backward_seconds);
  AppendRepeats(all.cpu_seconds, round.cpu_seconds);
  AppendRepeats(all.bytes_moved, round.bytes_moved);
}

void AppendServerRepeats(ServerResult& all, const ServerResult& round) {
  AppendRepeats(all.compute_seconds, round.compute_seconds);
  AppendRepeats(all.cpu_seconds, round.cpu_seconds);
}

// Adds rank `rank`'s result of the round just run, read from `path`: as its
// first round, or with its repeats appended to the earlier rounds'.
template <typename Result>
absl::Status AddRound(std::vector<Result>& results, int rank, const std::string& path,
                      absl::StatusOr<Result> (*decode)(const std::string&),
                      void (*append_repeats)(Result& all, const Result& round)) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<Result> result = decode(*text);
  if (!result.ok()) return result.status();
  if (results.size() <= static_cast<size_t>(rank)) {
    results.push_back(*std::move(result));
  } else {
    append_repeats(results[rank], *result);
  }
  return absl::OkStatus();
}

// Runs one mode in `dir` and appends its results (repeats concatenated
// across rounds).
absl::Status RunMode(const StragglerConfig& config, AttentionMode mode, const std::string& dir,
                     const LauncherOptions& options, std::vector<WorkerResult>& workers,
                     std::vector<ServerResult>& servers) {
  if (absl::Status s = MakeDirectories(dir); !s.ok()) return s;
  const bool disaggregated = mode == AttentionMode::kDisaggregated;
  if (absl::Status s = RunProcessGroup(ChildrenOf(config, mode, dir, options, AllowedCpus()),
                                       options.timeout);
      !s.ok()) {
    return s;
  }
  for (int w = 0; w < config.workers; ++w) {
    if (absl::Status s = AddRound(workers, w, WorkerResultPath(dir, w), DecodeWorkerResult,
                                  AppendWorkerRepeats);
        !s.ok()) {
      return s;
    }
  }
  for (int s = 0; disaggregated && s < config.servers; ++s) {
    if (absl::Status status = AddRound(servers, s, ServerResultPath(dir, s), DecodeServerResult,
                                       AppendServerRepeats);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

double LoadAverage() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : 0;
}

absl::StatusOr<std::string> MakeRunDirectory(const LauncherOptions& options) {
  if (!options.run_dir.empty()) return options.run_dir;
  const char* tmp = getenv("TEST_TMPDIR");
  if (tmp == nullptr) tmp = getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/attention_straggler.XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern));
  }
  return pattern;
}

}  // namespace

absl::Status RunLauncher(const StragglerConfig& config, const LauncherOptions& options) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  auto run_dir = MakeRunDirectory(options);
  if (!run_dir.ok()) return run_dir.status();
  // The kernel parallelises over tasks itself (--threads); OpenBLAS must not
  // start threads of its own in the children.
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  const double load_before = LoadAverage();
  const AttentionMode modes[] = {AttentionMode::kColocated, AttentionMode::kDisaggregated};
  std::vector<WorkerResult> workers[2];
  std::vector<ServerResult> servers[2];
  std::string last_dir[2];
  absl::Status status;
  for (int round = 0; round < options.rounds && status.ok(); ++round) {
    for (int m = 0; m < 2 && status.ok(); ++m) {
      last_dir[m] = absl::StrCat(*run_dir, "/round", round, "-", ModeName(modes[m]));
      status = RunMode(config, modes[m], last_dir[m], options, workers[m], servers[m]);
    }
  }
  const double load_after = LoadAverage();
  absl::StatusOr<ModeSummary> summaries[2] = {absl::UnknownError("not run"),
                                              absl::UnknownError("not run")};
  absl::StatusOr<OutputComparison> comparison = absl::UnknownError("not run");
  if (status.ok()) {
    for (int m = 0; m < 2; ++m) summaries[m] = Summarize(config, modes[m], workers[m], servers[m]);
    comparison = CompareOutputs(config, last_dir[0], last_dir[1]);
    for (const absl::Status& s :
         {summaries[0].status(), summaries[1].status(), comparison.status()}) {
      if (status.ok()) status = s;
    }
  }
  if (options.run_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(*run_dir, ignored);
  }
  if (!status.ok()) return status;

  ReportContext context{options.command, DescribePlacement(AllowedCpus(), options.pin),
                        load_before, load_after};
  std::printf("%s", FormatReport(config, *summaries[0], *summaries[1], *comparison, context)
                        .c_str());
  std::fflush(stdout);
  if (!options.summary_json.empty()) {
    if (absl::Status s = WriteFileAtomically(
            options.summary_json,
            FormatSummaryJson(config, *summaries[0], *summaries[1], *comparison));
        !s.ok()) {
      return s;
    }
  }
  if (!(comparison->max_relative_error <= options.max_error)) {
    return absl::DataLossError(absl::StrCat(
        "disaggregated outputs differ from colocated by ", comparison->max_relative_error,
        " (relative, ", comparison->worst, "), more than ", options.max_error));
  }
  return absl::OkStatus();
}

}  // namespace corescape::bench
