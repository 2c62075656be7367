// Text and JSON forms of the straggler benchmark's figures
// (straggler_report.h).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/attention_straggler/straggler_report.h"

namespace corescape::bench {
namespace {

std::string Milliseconds(const std::vector<double>& seconds) {
  std::vector<std::string> parts;
  for (double s : seconds) parts.push_back(absl::StrFormat("%.1f", s * 1e3));
  return absl::StrJoin(parts, " / ");
}

std::string JsonNumbers(const std::vector<double>& values, double scale) {
  std::vector<std::string> parts;
  for (double v : values) parts.push_back(absl::StrFormat("%.6g", v * scale));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

std::string ModeJson(const ModeSummary& m) {
  return absl::StrFormat(
      "{\"worker_ms\": %s, \"worker_forward_ms\": %s, \"worker_backward_ms\": %s, "
      "\"worker_cpu_ms\": %s, \"step_ms\": %.6g, \"step_best_ms\": %.6g, "
      "\"step_ms_per_repeat\": %s, "
      "\"spread_max_min\": %.6g, \"spread_max_mean\": %.6g, \"cpu_per_step_ms\": %.6g, "
      "\"server_compute_ms\": %s, \"server_cpu_ms\": %s, \"server_spread_max_min\": %.6g, "
      "\"load_max_mean\": %.6g, \"plan_server_pairs\": %s, \"split_documents\": %.0f, "
      "\"bytes_per_worker_step\": %.6g, \"cpu_step_estimate_ms\": %.6g}",
      JsonNumbers(m.worker_total, 1e3), JsonNumbers(m.worker_forward, 1e3),
      JsonNumbers(m.worker_backward, 1e3), JsonNumbers(m.worker_cpu, 1e3), m.step * 1e3,
      m.step_best * 1e3,
      JsonNumbers(m.step_per_repeat, 1e3), m.spread_max_min, m.spread_max_mean,
      m.cpu_per_step * 1e3, JsonNumbers(m.server_compute, 1e3), JsonNumbers(m.server_cpu, 1e3),
      m.server_spread_max_min, m.plan_imbalance, JsonNumbers(m.plan_server_pairs, 1),
      m.plan_split_documents, m.bytes_per_worker_step, m.cpu_step_estimate * 1e3);
}

double StepRatio(const ModeSummary& colocated, const ModeSummary& disaggregated) {
  return disaggregated.step > 0 ? colocated.step / disaggregated.step : 0.0;
}

double BestStepRatio(const ModeSummary& colocated, const ModeSummary& disaggregated) {
  return disaggregated.step_best > 0 ? colocated.step_best / disaggregated.step_best : 0.0;
}

}  // namespace

std::string FormatReport(const StragglerConfig& config, const ModeSummary& colocated,
                         const ModeSummary& disaggregated, const OutputComparison& comparison,
                         const ReportContext& context) {
  std::string out;
  absl::StrAppend(&out, "Core-attention straggler: colocated vs disaggregated, real processes\n",
                  "command: ", context.command, "\n", "configuration: ", config.Describe(), "\n",
                  "placement: ", context.placement, "\n",
                  absl::StrFormat("load average (1 min) before / after: %.2f / %.2f\n",
                                  context.load_before, context.load_after),
                  "times: medians over the timed repeats; CPU = user + system time of the "
                  "process meanwhile\n\n");

  absl::StrAppend(&out, "| mode | worker | documents | causal pairs per head | forward ms | "
                        "backward ms | forward+backward ms | CPU ms |\n"
                        "|---|---|---|---|---|---|---|---|\n");
  for (const ModeSummary* m : {&colocated, &disaggregated}) {
    for (int w = 0; w < config.workers; ++w) {
      const std::vector<int64_t> lengths = config.DocumentLengths(w);
      absl::StrAppend(
          &out, absl::StrFormat("| %s | %d | %d | %d | %.1f | %.1f | %.1f | %.1f |\n",
                                ModeName(m->mode), w, lengths.size(), CausalPairsOf(lengths),
                                m->worker_forward[w] * 1e3, m->worker_backward[w] * 1e3,
                                m->worker_total[w] * 1e3, m->worker_cpu[w] * 1e3));
    }
  }
  absl::StrAppend(&out, "\n| attention server | causal pairs per head (plan) | compute ms "
                        "(rebatch + kernel) | CPU ms |\n|---|---|---|---|\n");
  for (size_t s = 0; s < disaggregated.server_compute.size(); ++s) {
    const double pairs = s < disaggregated.plan_server_pairs.size()
                             ? disaggregated.plan_server_pairs[s]
                             : 0.0;
    absl::StrAppend(&out, absl::StrFormat("| %d | %.0f | %.1f | %.1f |\n", s, pairs,
                                          disaggregated.server_compute[s] * 1e3,
                                          disaggregated.server_cpu[s] * 1e3));
  }

  absl::StrAppend(&out, "\n| mode | step ms (slowest worker), median | best step ms | worker "
                        "max/min | worker max/mean | load max/mean | CPU ms per step, all "
                        "processes | MB moved per worker-step |\n"
                        "|---|---|---|---|---|---|---|---|\n");
  for (const ModeSummary* m : {&colocated, &disaggregated}) {
    const bool moved = m->bytes_per_worker_step > 0;
    absl::StrAppend(
        &out, absl::StrFormat("| %s | %.1f | %.1f | %.2f | %.2f | %.3f | %.1f | %s |\n",
                              ModeName(m->mode), m->step * 1e3, m->step_best * 1e3,
                              m->spread_max_min,
                              m->spread_max_mean, m->plan_imbalance, m->cpu_per_step * 1e3,
                              moved ? absl::StrFormat("%.1f", m->bytes_per_worker_step / 1e6)
                                    : "-"));
  }
  // Whether other load took CPU time from the processes that set the step.
  const size_t slowest_worker =
      std::max_element(colocated.worker_total.begin(), colocated.worker_total.end()) -
      colocated.worker_total.begin();
  std::vector<std::string> server_shares;
  for (size_t s = 0; s < disaggregated.server_compute.size(); ++s) {
    server_shares.push_back(absl::StrFormat(
        "%.0f%%", 100 * disaggregated.server_cpu[s] / disaggregated.server_compute[s]));
  }
  absl::StrAppend(
      &out,
      absl::StrFormat("\nCPU / wall: colocated worker %d (the slowest) %.0f%%; attention servers "
                      "(CPU of the step / compute wall) %s. Well below 100%%: the process waited "
                      "for its CPU (other load, or more processes than CPUs)\n",
                      slowest_worker,
                      100 * colocated.worker_cpu[slowest_worker] /
                          colocated.worker_total[slowest_worker],
                      absl::StrJoin(server_shares, ", ")));
  const double colocated_sum =
      std::accumulate(colocated.worker_total.begin(), colocated.worker_total.end(), 0.0);
  const double slowest_server =
      disaggregated.server_compute.empty()
          ? 0.0
          : *std::max_element(disaggregated.server_compute.begin(),
                              disaggregated.server_compute.end());
  absl::StrAppend(
      &out,
      "load max/mean: colocated = causal pairs per worker; disaggregated = the planner's "
      "modelled server load (",
      absl::StrFormat("%.0f", disaggregated.plan_split_documents), " document(s) split)\n",
      "steps per repeat, ms: colocated ", Milliseconds(colocated.step_per_repeat),
      "; disaggregated ", Milliseconds(disaggregated.step_per_repeat), "\n",
      absl::StrFormat("colocated attention time summed over workers / S = %.1f ms (S servers "
                      "with perfect balance and free transfers)\n",
                      colocated_sum / config.servers * 1e3),
      absl::StrFormat("disaggregated: slowest server computes %.1f ms of the %.1f ms step; the "
                      "rest is transfer, gather/scatter and waiting\n",
                      slowest_server * 1e3, disaggregated.step * 1e3),
      absl::StrFormat("CPU-time estimate of the step on dedicated cores (colocated: slowest "
                      "worker's CPU; disaggregated: slowest server's + slowest worker's CPU): "
                      "%.1f ms vs %.1f ms, ratio %.2fx\n\n",
                      colocated.cpu_step_estimate * 1e3, disaggregated.cpu_step_estimate * 1e3,
                      disaggregated.cpu_step_estimate > 0
                          ? colocated.cpu_step_estimate / disaggregated.cpu_step_estimate
                          : 0.0),
      absl::StrFormat("step time colocated / disaggregated: %.2fx (median steps), %.2fx (best "
                      "steps)\n",
                      StepRatio(colocated, disaggregated), BestStepRatio(colocated, disaggregated)),
      absl::StrFormat("outputs, disaggregated vs colocated: max relative error %.2g (%s)\n",
                      comparison.max_relative_error, comparison.worst));
  return out;
}

std::string FormatSummaryJson(const StragglerConfig& config, const ModeSummary& colocated,
                              const ModeSummary& disaggregated,
                              const OutputComparison& comparison) {
  return absl::StrFormat(
      "{\"workers\": %d, \"servers\": %d, \"tokens_per_worker\": %d, \"layers\": %d, "
      "\"repeats\": %d, \"colocated\": %s, \"disaggregated\": %s, \"step_ratio\": %.6g, "
      "\"best_step_ratio\": %.6g, \"max_relative_error\": %.6g, \"worst_output\": \"%s\"}\n",
      config.workers, config.servers, config.tokens_per_worker, config.layers, config.repeats,
      ModeJson(colocated), ModeJson(disaggregated),
      StepRatio(colocated, disaggregated), BestStepRatio(colocated, disaggregated),
      comparison.max_relative_error, comparison.worst);
}

}  // namespace corescape::bench
