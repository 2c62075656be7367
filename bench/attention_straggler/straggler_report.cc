#include "bench/attention_straggler/straggler_report.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/attention_straggler/attention_step.h"
#include "runtime/base/atomic_file.h"

namespace corescape::bench {
namespace {

double Max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double Min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double Mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

absl::StatusOr<std::vector<float>> ReadFloats(const std::string& path) {
  auto bytes = ReadFileToString(path);
  if (!bytes.ok()) return bytes.status();
  std::vector<float> x(bytes->size() / sizeof(float));
  std::copy(bytes->begin(), bytes->begin() + x.size() * sizeof(float),
            reinterpret_cast<char*>(x.data()));
  return x;
}

}  // namespace

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

absl::StatusOr<ModeSummary> Summarize(const StragglerConfig& config, AttentionMode mode,
                                      const std::vector<WorkerResult>& workers,
                                      const std::vector<ServerResult>& servers) {
  ModeSummary m;
  m.mode = mode;
  if (workers.size() != static_cast<size_t>(config.workers)) {
    return absl::DataLossError(absl::StrCat(ModeName(mode), ": ", workers.size(),
                                            " worker results for ", config.workers, " workers"));
  }
  const size_t repeats = workers[0].forward_seconds.size();
  m.step_per_repeat.assign(repeats, 0.0);
  std::vector<double> bytes, cpu_per_repeat(repeats, 0.0);
  for (const WorkerResult& w : workers) {
    if (w.forward_seconds.size() != repeats || w.cpu_seconds.size() != repeats) {
      return absl::DataLossError(absl::StrCat(
          ModeName(mode), ": worker ", w.worker, " reported ", w.forward_seconds.size(),
          " repeats (", w.cpu_seconds.size(), " CPU times), worker 0 ", repeats));
    }
    std::vector<double> total(repeats);
    for (size_t r = 0; r < repeats; ++r) {
      total[r] = w.forward_seconds[r] + w.backward_seconds[r];
      m.step_per_repeat[r] = std::max(m.step_per_repeat[r], total[r]);
      cpu_per_repeat[r] += w.cpu_seconds[r];
    }
    m.worker_cpu.push_back(Median(w.cpu_seconds));
    m.worker_forward.push_back(Median(w.forward_seconds));
    m.worker_backward.push_back(Median(w.backward_seconds));
    m.worker_total.push_back(Median(total));
    bytes.insert(bytes.end(), w.bytes_moved.begin(), w.bytes_moved.end());
  }
  m.step = Median(m.step_per_repeat);
  m.step_best = Min(m.step_per_repeat);
  m.spread_max_min = Ratio(Max(m.worker_total), Min(m.worker_total));
  m.spread_max_mean = Ratio(Max(m.worker_total), Mean(m.worker_total));
  m.bytes_per_worker_step = Median(bytes);
  if (mode == AttentionMode::kColocated) {
    m.cpu_per_step = Median(cpu_per_repeat);
    m.cpu_step_estimate = Max(m.worker_cpu);
    std::vector<double> pairs;
    for (int w = 0; w < config.workers; ++w) {
      pairs.push_back(static_cast<double>(CausalPairsOf(config.DocumentLengths(w))));
    }
    m.plan_imbalance = Ratio(Max(pairs), Mean(pairs));
    return m;
  }
  m.plan_imbalance = workers[0].plan_imbalance;
  m.plan_server_pairs = workers[0].plan_server_pairs;
  m.plan_split_documents = workers[0].plan_split_documents;
  for (const ServerResult& s : servers) {
    if (s.compute_seconds.size() != repeats || s.cpu_seconds.size() != repeats) {
      return absl::DataLossError(absl::StrCat("server ", s.server, " reported ",
                                              s.compute_seconds.size(), " repeats, workers ",
                                              repeats));
    }
    m.server_compute.push_back(Median(s.compute_seconds));
    m.server_cpu.push_back(Median(s.cpu_seconds));
    for (size_t r = 0; r < repeats; ++r) cpu_per_repeat[r] += s.cpu_seconds[r];
  }
  m.cpu_per_step = Median(cpu_per_repeat);
  if (!m.server_compute.empty()) {
    m.cpu_step_estimate = Max(m.server_cpu) + Max(m.worker_cpu);
    m.server_spread_max_min = Ratio(Max(m.server_compute), Min(m.server_compute));
  }
  return m;
}

absl::StatusOr<OutputComparison> CompareOutputs(const StragglerConfig& config,
                                                const std::string& colocated_dir,
                                                const std::string& disaggregated_dir) {
  OutputComparison result;
  for (int w = 0; w < config.workers; ++w) {
    for (const char* name : kOutputNames) {
      auto expected =
          ReadFloats(OutputPath(colocated_dir, AttentionMode::kColocated, w, name));
      if (!expected.ok()) return expected.status();
      auto actual =
          ReadFloats(OutputPath(disaggregated_dir, AttentionMode::kDisaggregated, w, name));
      if (!actual.ok()) return actual.status();
      if (expected->size() != actual->size() || expected->empty()) {
        return absl::DataLossError(absl::StrCat("worker ", w, " ", name, ": ", actual->size(),
                                                " floats disaggregated, ", expected->size(),
                                                " colocated"));
      }
      double diff = 0, scale = 0;
      for (size_t i = 0; i < expected->size(); ++i) {
        const double a = (*actual)[i], b = (*expected)[i];
        if (!std::isfinite(a)) diff = INFINITY;
        diff = std::max(diff, std::abs(a - b));
        scale = std::max(scale, std::abs(b));
      }
      const double error = scale > 0 ? diff / scale : diff;
      if (error >= result.max_relative_error) {
        result.max_relative_error = error;
        result.worst = absl::StrCat("worker ", w, " ", name);
      }
    }
  }
  return result;
}

}  // namespace corescape::bench
