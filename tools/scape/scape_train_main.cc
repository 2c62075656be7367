// corescape-scape-train: one in-process data-parallel run (P ranks as
// threads, no network) with a chosen optimizer, for comparing SCAPE
// formulations against dense AdamW/AdamS in minutes. Writes the loss curve
// as CSV and prints one JSON summary line; --report_out writes every rank's
// outcome (checksums of parameters, first moment and residual, per-step
// losses and bytes) in the format corescape-scape-rank writes for one rank.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "tools/scape/driver_flags.h"
#include "tools/scape/rank_report.h"
#include "tools/scape/scape_driver.h"

ABSL_FLAG(std::string, label, "", "name printed in the summary");
ABSL_FLAG(bool, quiet, false, "no per-step lines");
ABSL_FLAG(std::string, report_out, "", "write every rank's outcome here (JSON)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "corescape-scape-train --data=DIR --method=scape --density=0.01 [--csv=FILE]");
  absl::ParseCommandLine(argc, argv);
  auto parsed = corescape::scape_tool::DriverConfigFromFlags();
  if (!parsed.ok()) {
    std::fprintf(stderr, "corescape-scape-train: %s\n", parsed.status().ToString().c_str());
    return 2;
  }
  const corescape::scape_tool::DriverConfig& config = *parsed;
  const bool quiet = absl::GetFlag(FLAGS_quiet);
  auto summary = corescape::scape_tool::RunDataParallelTraining(
      config, [&](const corescape::scape_tool::StepRecord& r) {
        if (quiet && r.val_loss < 0) return;
        std::printf("step %5lld  loss %.4f%s  lr %.2e  bytes/worker %.0f  %s  %.0fs\n",
                    static_cast<long long>(r.step), r.train_loss,
                    r.val_loss >= 0 ? absl::StrFormat("  val %.4f", r.val_loss).c_str() : "",
                    r.lr, r.bytes_sent, r.dense ? "dense" : "sparse", r.elapsed);
        std::fflush(stdout);
      });
  if (!summary.ok()) {
    std::fprintf(stderr, "corescape-scape-train: %s\n", summary.status().ToString().c_str());
    return 1;
  }
  const std::string report_out = absl::GetFlag(FLAGS_report_out);
  if (!report_out.empty()) {
    nlohmann::json report;
    report["mode"] = "in-process";
    report["config"] = corescape::scape_tool::DriverConfigToJson(config);
    report["diverged"] = summary->diverged;
    report["ranks"] = nlohmann::json::array();
    for (const auto& outcome : summary->ranks) {
      report["ranks"].push_back(corescape::scape_tool::RankOutcomeToJson(outcome));
    }
    if (absl::Status s = corescape::scape_tool::WriteJsonFile(report_out, report); !s.ok()) {
      std::fprintf(stderr, "corescape-scape-train: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const corescape::optim::ScapeConfig& s = config.scape;
  nlohmann::json j;
  j["label"] = absl::GetFlag(FLAGS_label);
  j["method"] = config.method;
  j["density"] = s.density;
  j["steps"] = config.steps;
  j["lr"] = config.lr;
  j["parameters"] = summary->parameters;
  j["initial_val_loss"] = summary->initial_val_loss;
  j["final_val_loss"] = summary->diverged ? nlohmann::json(nullptr) : nlohmann::json(summary->final_val_loss);
  j["final_train_loss"] = summary->final_train_loss;
  j["bytes_per_step"] = summary->bytes_per_step;
  j["sparse_bytes_per_step"] = summary->sparse_bytes_per_step;
  j["dense_bytes_per_step"] = summary->dense_bytes_per_step;
  j["ratio_to_dense"] = summary->bytes_per_step / summary->dense_bytes_per_step;
  j["sparse_ratio_to_dense"] = summary->sparse_bytes_per_step / summary->dense_bytes_per_step;
  j["seconds"] = summary->seconds;
  j["diverged"] = summary->diverged;
  j["coverage"] = summary->coverage;
  j["mean_age"] = summary->mean_age;
  j["residual_to_momentum"] = summary->residual_to_momentum;
  j["config"] = s.ToString();
  std::printf("SUMMARY %s\n", j.dump().c_str());
  return 0;
}
