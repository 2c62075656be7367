// Training-step throughput on cuda:0: `small` and `llama-500m` (seq 4096)
// with bf16 GEMMs, one document per row. Per configuration: tokens/s of the
// whole step (forward, backward, AdamW with its state on the GPU) and of
// forward + backward alone, and MFU of each against the GPU's dense peak at
// the precision (model::DensePeakTflops by its name, as a worker reports
// it: 989 for an H100/H200 SXM in bf16, 756 for an H100 PCIe; or
// --peak_tflops); and, measured in the same
// run, the step with AdamW on the host (gradients downloaded, parameters
// uploaded) as the baseline the device optimizer is compared with; and the
// step with SCAPE at each --scape_densities — the default catch-up rule and
// the reference rule, each with its state on the GPU and with its residuals
// offloaded to pinned host memory — and raw-gradient top-k AdamW
// (topk-adamw, on the GPU) at the same densities, each with its ratio to
// the AdamW step and its own work's share (selection, mask coding, packing). After each
// measurement a JSON line of the figures so far (a configuration still
// being timed says "finished": false); the last line holds them all.
// Without a GPU it says why and exits 0.
//
// --device=cpu runs the same steps on the CPU backend with the device
// path's copies (CpuParameterMode::kDeviceCopies, fp32): MFU means nothing
// there, but it rehearses the benchmark and times the host-side work that
// the device forms of the optimizers leave (their transfers and bookkeeping)
// on a machine without a GPU.
#include <cblas.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_main.h"
#include "bench/train_throughput/timed_steps.h"
#include "runtime/base/thread_pool.h"
#include "runtime/device/device.h"
#include "runtime/device/device_runtime.h"
#include "runtime/model/model_ops.h"
#include "runtime/model/peak_flops.h"
#include "runtime/model/training_flops.h"
#include "runtime/model/transformer.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/optim/optimizer_registry.h"

ABSL_FLAG(std::string, device, "cuda:0", "cuda:N, or cpu (the CPU backend's device path)");
ABSL_FLAG(int32_t, threads, 2, "--device=cpu: compute threads");
ABSL_FLAG(std::string, configs, "small:8x1024,llama-500m:2x4096",
          "preset:rowsxseq, comma-separated");
ABSL_FLAG(std::string, precision, "bf16", "fp32 or bf16");
ABSL_FLAG(double, peak_tflops, 0,
          "the GPU's dense peak at that precision; 0: its known peak by name (model::DensePeakTflops)");
ABSL_FLAG(int32_t, steps, 5, "timed steps per configuration");
ABSL_FLAG(int32_t, warmup_steps, 2, "untimed steps first");
ABSL_FLAG(bool, host_optimizer_baseline, true,
          "also time the step with AdamW on the host, for the ratio");
ABSL_FLAG(std::string, scape_densities, "0.01,0.1",
          "densities at which to time the step with SCAPE (the default and the reference rule, "
          "both on the GPU) and its own work's share of the step; empty: none");
ABSL_FLAG(bool, profile_ops, true,
          "also run one profiled step (AdamW on the GPU, and SCAPE on the GPU at each density) and "
          "print each op's device time and share of the step");
ABSL_FLAG(bool, offload_residuals, true,
          "also time each SCAPE rule with its residuals in pinned host memory");

namespace corescape::bench {

// One profiled step of `options` on the GPU: prints each op's device time
// against the step's (timed without profiling: `step_seconds`) and returns
// the ops as JSON members.
std::string ProfiledStep(const char* label, model::Transformer& model, model::ModelOps& ops,
                         const model::ModelBatch& batch, const optim::OptimizerOptions& options,
                         double step_seconds) {
  auto profiled = TimeTrainingSteps(model, ops.local_attention(), batch, 0, 1,
                                    OptimizerPlacement::kModelDevice, options, /*profile_ops=*/true);
  if (!profiled.ok()) {
    std::printf("  %s op profile: %s\n", label, profiled.status().ToString().c_str());
    return "";
  }
  std::printf("  %s op profile, one step (device ms; share of the %.1f ms step):\n", label,
              1e3 * step_seconds);
  std::vector<std::string> members;
  double profiled_ms = 0;
  for (const device::StreamProfiler::Total& op : profiled->op_profile) {
    std::printf("    %-24s %5lld spans %9.2f ms  %5.1f%%\n", op.name.c_str(),
                static_cast<long long>(op.spans), op.milliseconds,
                100 * op.milliseconds / (1e3 * step_seconds));
    members.push_back(absl::StrFormat("\"%s\": %.3f", op.name, op.milliseconds));
    profiled_ms += op.milliseconds;
  }
  std::printf("    %-24s             %9.2f ms  %5.1f%% (the rest: host work, gaps)\n", "all ops",
              profiled_ms, 100 * profiled_ms / (1e3 * step_seconds));
  std::fflush(stdout);
  return absl::StrJoin(members, ", ");
}

int RunBenchmark() {
  auto device = device::ParseDevice(absl::GetFlag(FLAGS_device));
  if (!device.ok()) {
    std::fprintf(stderr, "--device: %s\n", std::string(device.status().message()).c_str());
    return 2;
  }
  if (device->is_cuda() && !device::CudaCompiledIn()) {
    std::printf("train_step_gpu_bench: built without --config=cuda; nothing to measure\n");
    return 0;
  }
  std::string gpu_name;
  if (device->is_cuda()) {
    auto runtime = device::OpenDevice(*device);
    if (!runtime.ok()) {
      std::printf("train_step_gpu_bench: %s; nothing to measure\n",
                  std::string(runtime.status().message()).c_str());
      return 0;
    }
    auto info = (*runtime)->Info();
    if (info.ok()) gpu_name = info->name;
  }
  auto precision = model::ParsePrecision(absl::GetFlag(FLAGS_precision));
  if (!precision.ok()) {
    std::fprintf(stderr, "%s\n", std::string(precision.status().message()).c_str());
    return 2;
  }
  if (device->is_cpu() && *precision != model::Precision::kFp32) {
    std::fprintf(stderr, "--device=cpu computes in fp32: pass --precision=fp32\n");
    return 2;
  }
  std::optional<ThreadPool> pool;
  if (device->is_cpu()) {
    pool.emplace(absl::GetFlag(FLAGS_threads));
    openblas_set_num_threads(absl::GetFlag(FLAGS_threads));
  }
  if (!(absl::GetFlag(FLAGS_peak_tflops) >= 0)) {
    std::fprintf(stderr, "--peak_tflops must be 0 (the GPU's known peak) or positive\n");
    return 2;
  }
  // 0 where neither is known (a CPU, an unlisted GPU): MFU is then 0.
  const double peak_tflops = absl::GetFlag(FLAGS_peak_tflops) > 0
                                 ? absl::GetFlag(FLAGS_peak_tflops)
                                 : model::DensePeakTflops(gpu_name, *precision);
  std::vector<std::string> results;
  // The figures so far as one JSON line (the finished configurations, and
  // the one being timed): printed after every measurement, so a run cut
  // off by its time limit still ends with what it measured (the device
  // check keeps the last JSON line).
  auto print_figures = [&](const std::string& in_progress) {
    std::vector<std::string> members = results;
    if (!in_progress.empty()) members.push_back(in_progress);
    std::printf("{\"gpu\": \"%s\", \"precision\": \"%s\", \"peak_tflops\": %.1f, %s}\n",
                gpu_name.c_str(), std::string(model::PrecisionName(*precision)).c_str(), peak_tflops,
                absl::StrJoin(members, ", ").c_str());
    std::fflush(stdout);
  };
  for (absl::string_view spec : absl::StrSplit(absl::GetFlag(FLAGS_configs), ',')) {
    std::vector<std::string> parts = absl::StrSplit(spec, absl::ByAnyChar(":x"));
    int rows = 0, seq = 0;
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &rows) ||
        !absl::SimpleAtoi(parts[2], &seq) || rows <= 0 || seq <= 0) {
      std::fprintf(stderr, "--configs: '%s' is not preset:rowsxseq\n", std::string(spec).c_str());
      return 2;
    }
    auto config = model::PresetConfig(parts[0]);
    if (!config.ok()) {
      std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
      return 2;
    }
    std::shared_ptr<model::ModelOps> shared_ops;
    if (device->is_cpu()) {
      shared_ops = model::NewCpuModelOps(model::CpuParameterMode::kDeviceCopies, &*pool);
    } else {
      auto ops = model::OpenModelOps(*device, *precision, nullptr);
      if (!ops.ok()) {
        std::fprintf(stderr, "%s\n", ops.status().ToString().c_str());
        return 1;
      }
      shared_ops = *std::move(ops);
    }
    auto model = model::Transformer::Create(*config, shared_ops);
    if (!model.ok()) return 1;
    model->InitializeWeights(1);
    const model::ModelBatch batch = PackedRandomBatch(*config, rows, seq, 1);
    // The host baseline first: it leaves the host parameters current.
    double host_step_seconds = 0;
    if (absl::GetFlag(FLAGS_host_optimizer_baseline)) {
      auto host = TimeTrainingSteps(*model, shared_ops->local_attention(), batch,
                                    absl::GetFlag(FLAGS_warmup_steps), absl::GetFlag(FLAGS_steps),
                                    OptimizerPlacement::kHost);
      if (host.ok()) {
        host_step_seconds = host->step_seconds;
      } else {
        std::printf("%s %dx%d host optimizer: %s\n", parts[0].c_str(), rows, seq,
                    host.status().ToString().c_str());
      }
    }
    auto timed = TimeTrainingSteps(*model, shared_ops->local_attention(), batch,
                                   absl::GetFlag(FLAGS_warmup_steps), absl::GetFlag(FLAGS_steps),
                                   OptimizerPlacement::kModelDevice);
    if (!timed.ok()) {
      std::printf("%s %dx%d: %s\n", parts[0].c_str(), rows, seq, timed.status().ToString().c_str());
      results.push_back(absl::StrCat("\"", parts[0], "\": {\"error\": \"",
                                     absl::StatusCodeToString(timed.status().code()), "\"}"));
      print_figures("");
      continue;
    }
    const double flops = model::TrainingFlops(*config, batch);
    const double tokens_per_s = batch.rows() / timed->step_seconds;
    const double compute_tokens_per_s = batch.rows() / timed->compute_seconds;
    const double model_tflops = model::ModelTflopsPerSecond(flops, timed->step_seconds);
    const double mfu = model::Mfu(model_tflops, peak_tflops);
    const double compute_mfu =
        model::Mfu(model::ModelTflopsPerSecond(flops, timed->compute_seconds), peak_tflops);
    const double speedup = host_step_seconds > 0 ? host_step_seconds / timed->step_seconds : 0;
    std::printf(
        "%-11s %dx%-5d step %8.1f ms (fwd+bwd %8.1f, optimizer %7.1f)  %9.0f tok/s  "
        "MFU %.3f (fwd+bwd %.3f)  loss %.3f  host-optimizer step %8.1f ms (%.2fx)\n",
        parts[0].c_str(), rows, seq, 1e3 * timed->step_seconds, 1e3 * timed->compute_seconds,
        1e3 * timed->optimizer_seconds, tokens_per_s, mfu, compute_mfu, timed->last_loss,
        1e3 * host_step_seconds, speedup);
    std::fflush(stdout);
    const bool profile_ops = absl::GetFlag(FLAGS_profile_ops);
    const std::string adamw_profile =
        profile_ops ? ProfiledStep("adamw", *model, *shared_ops, batch, PlainAdamW(), timed->step_seconds)
                    : "";
    // SCAPE's step at one density: `label` names the form in the output.
    auto time_scape = [&](const char* label, absl::string_view density_text,
                          const optim::OptimizerOptions& scape,
                          OptimizerPlacement placement) -> std::optional<std::string> {
      auto sparse = TimeTrainingSteps(*model, shared_ops->local_attention(), batch,
                                      absl::GetFlag(FLAGS_warmup_steps),
                                      absl::GetFlag(FLAGS_steps), placement, scape);
      if (!sparse.ok()) {
        std::printf("%s %dx%d %s d=%s: %s\n", parts[0].c_str(), rows, seq, label,
                    std::string(density_text).c_str(), sparse.status().ToString().c_str());
        return std::nullopt;
      }
      const double share = sparse->sparse_overhead_seconds() / sparse->step_seconds;
      const double ratio = sparse->step_seconds / timed->step_seconds;
      const optim::OptimizerStepPhases& phases = sparse->phases;
      std::printf("%-11s %dx%-5d %-15s d=%-5s step %8.1f ms (%.2fx AdamW's; optimizer %7.1f, own "
                  "work %6.1f = %.3f of the step: select %.1f, mask coding %.1f, pack %.1f; "
                  "update %.1f, waits %.1f; mask coding beside the step %.1f)\n",
                  parts[0].c_str(), rows, seq, label, std::string(density_text).c_str(),
                  1e3 * sparse->step_seconds, ratio, 1e3 * sparse->optimizer_seconds,
                  1e3 * sparse->sparse_overhead_seconds(), share, 1e3 * phases.select, 1e3 * phases.encode,
                  1e3 * phases.pack, 1e3 * phases.update, 1e3 * (phases.all_reduce_wait + phases.mask_wait),
                  1e3 * phases.coding_overlapped);
      std::fflush(stdout);
      const std::string profile =
          profile_ops && placement == OptimizerPlacement::kModelDevice &&
                  scape.name == optim::OptimizerName(optim::OptimizerKind::kScape) &&
                  !scape.scape.offload_residuals && scape.scape.rule == optim::ScapeRule::kCatchUp
              ? ProfiledStep(label, *model, *shared_ops, batch, scape, sparse->step_seconds)
              : "";
      return absl::StrFormat(
          "\"%s\": {\"step_ms\": %.1f, \"step_vs_adamw\": %.3f, \"optimizer_ms\": %.1f, "
          "\"own_work_share\": %.4f, \"select_ms\": %.2f, \"mask_coding_ms\": %.2f, \"pack_ms\": %.2f, "
          "\"mask_coding_overlapped_ms\": %.2f, \"op_profile_ms\": {%s}}",
          density_text, 1e3 * sparse->step_seconds, ratio, 1e3 * sparse->optimizer_seconds, share,
          1e3 * phases.select, 1e3 * phases.encode, 1e3 * phases.pack,
          1e3 * phases.coding_overlapped, profile);
    };
    std::vector<std::string> scape_results, scape_offload_results, reference_results,
        reference_offload_results, topk_results;
    // This configuration's figures; `finished` false while forms remain.
    auto config_figures = [&](bool finished) {
      return absl::StrFormat(
          "\"%s\": {\"rows\": %d, \"seq\": %d, \"finished\": %s, \"tokens_per_s\": %.0f, "
          "\"fwd_bwd_tokens_per_s\": %.0f, \"model_tflops_per_second\": %.6f, \"mfu\": %.4f, "
          "\"fwd_bwd_mfu\": %.4f, \"step_ms\": %.1f, "
          "\"optimizer_ms\": %.1f, \"host_optimizer_step_ms\": %.1f, "
          "\"device_optimizer_speedup\": %.2f, \"op_profile_ms\": {%s}, "
          "\"scape_on_device\": {%s}, \"scape_offloaded\": {%s}, "
          "\"scape_reference_on_device\": {%s}, \"scape_reference_offloaded\": {%s}, "
          "\"topk_adamw_on_device\": {%s}}",
          parts[0], rows, seq, finished ? "true" : "false", tokens_per_s, compute_tokens_per_s,
          model_tflops, mfu, compute_mfu, 1e3 * timed->step_seconds, 1e3 * timed->optimizer_seconds,
          1e3 * host_step_seconds, speedup, adamw_profile, absl::StrJoin(scape_results, ", "),
          absl::StrJoin(scape_offload_results, ", "), absl::StrJoin(reference_results, ", "),
          absl::StrJoin(reference_offload_results, ", "), absl::StrJoin(topk_results, ", "));
    };
    print_figures(config_figures(false));
    for (absl::string_view text :
         absl::StrSplit(absl::GetFlag(FLAGS_scape_densities), ',', absl::SkipEmpty())) {
      double density = 0;
      if (!absl::SimpleAtod(text, &density) || !(density > 0 && density <= 1)) {
        std::fprintf(stderr, "--scape_densities: '%s' is not in (0, 1]\n",
                     std::string(text).c_str());
        return 2;
      }
      optim::OptimizerOptions scape;
      scape.scape.density = density;
      // Both rules on the device, then (--offload_residuals) offloaded;
      // last, raw-gradient top-k AdamW (the family SCAPE replaces).
      struct Form {
        optim::OptimizerKind kind;
        optim::ScapeRule rule;
        bool offload;
        const char* label;
        std::vector<std::string>* results;
      };
      const Form forms[] = {
          {optim::OptimizerKind::kScape, optim::ScapeRule::kCatchUp, false, "scape", &scape_results},
          {optim::OptimizerKind::kScape, optim::ScapeRule::kReference, false, "scape-reference",
           &reference_results},
          {optim::OptimizerKind::kScape, optim::ScapeRule::kCatchUp, true, "scape-offl",
           &scape_offload_results},
          {optim::OptimizerKind::kScape, optim::ScapeRule::kReference, true, "reference-offl",
           &reference_offload_results},
          {optim::OptimizerKind::kTopKAdamW, optim::ScapeRule::kCatchUp, false, "topk-adamw",
           &topk_results}};
      for (const Form& form : forms) {
        if (form.offload && !absl::GetFlag(FLAGS_offload_residuals)) continue;
        scape.name = optim::OptimizerName(form.kind);
        scape.scape.rule = form.rule;
        scape.scape.offload_residuals = form.offload;
        if (auto r = time_scape(form.label, text, scape, OptimizerPlacement::kModelDevice)) {
          form.results->push_back(*r);
          print_figures(config_figures(false));
        }
      }
    }
    results.push_back(config_figures(true));
  }
  print_figures("");
  return 0;
}

}  // namespace corescape::bench
