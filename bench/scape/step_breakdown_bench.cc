// Where a SCAPE step's optimizer time goes, beside dense AdamS's step
// compute, on the production DataParallelTrainer (the worker's optimizer
// construction): P ranks as threads of this process over InProcessRankGroups.
// Communication (all-reduce and mask-exchange waits) is reported but left
// out of the overhead, so an in-process group measures the same overhead as
// the data plane would, without the network's noise.
//
// Per timed step and method it prints the rank-mean phases of the optimizer
// (select, encode, pack, all-reduce wait, mask wait, update) and the
// trainer's forward/backward compute; then per method the means; then ONE
// JSON line {"overhead_share_99": X, "overhead_share_90": X}: SCAPE's
// non-communication optimizer time per sparse step over dense AdamS's step
// compute (forward + backward + update), both measured in this run. Methods
// are run in turn, `rounds` times, so load drifts hit all of them alike.
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_main.h"
#include "runtime/optim/in_process_rank_group.h"
#include "runtime/optim/optimizer_names.h"
#include "runtime/optim/scape_optimizer.h"
#include "runtime/train/data_parallel_trainer.h"
#include "tools/scape/run_shape_flags.h"
#include "tools/scape/timed_rank_group.h"
#include "tools/scape/training_rank.h"

// --data, --model, --ranks (threads of this process), --micro_batch,
// --seq_len and --rule are tools/scape's (run_shape_flags.h);
// step_breakdown.sh gives this benchmark's shape.
ABSL_FLAG(int32_t, steps, 3, "timed steps per method and round");
ABSL_FLAG(int32_t, rounds, 2, "times every method is run, in turn");
ABSL_FLAG(std::string, densities, "0.01,0.1", "SCAPE densities (d = 1 - sparsity)");
ABSL_FLAG(bool, shared_group, false,
          "the trainer's token counts and losses share the optimizer's group (a CPU job over "
          "UCX), so the mask exchange encodes on the step's thread; else they go over a "
          "control group and it encodes on its own");

namespace corescape::bench {
namespace {

// One rank's timed step.
struct StepSample {
  double compute = 0;  // the trainer's step minus its collectives and optimizer step
  optim::OptimizerStepPhases phases;
};

struct Method {
  std::string label;
  scape_tool::DriverConfig config;
};

// Runs `method` for 1 + steps steps on every rank; the first step (dense
// for SCAPE: the mask for step 1 is selected at its end) is not timed.
// Returns samples[step][rank].
absl::StatusOr<std::vector<std::vector<StepSample>>> RunMethod(const Method& method,
                                                               int32_t steps) {
  const int P = method.config.ranks;
  auto trainer_config = scape_tool::TrainerConfigFor(method.config);
  if (!trainer_config.ok()) return trainer_config.status();
  optim::InProcessHub optimizer_hub(P), control_hub(P);
  std::vector<std::vector<StepSample>> samples(steps, std::vector<StepSample>(P));
  std::vector<absl::Status> status(P);
  auto rank_main = [&](int rank) -> absl::Status {
    optim::InProcessRankGroup group(&optimizer_hub, rank), control(&control_hub, rank);
    scape_tool::TimedRankGroup optimizer_group(&group), control_group(&control);
    auto trainer = train::DataParallelTrainer::Create(
        *trainer_config, &optimizer_group,
        absl::GetFlag(FLAGS_shared_group) ? nullptr : &control_group);
    if (!trainer.ok()) return trainer.status();
    for (int32_t step = 0; step <= steps; ++step) {
      auto result = (*trainer)->Step();
      if (!result.ok()) return result.status();
      const optim::OptimizerStepStats& stats = (*trainer)->optimizer().last_step();
      if (step == 0) continue;
      if (method.config.method == optim::OptimizerName(optim::OptimizerKind::kScape) &&
          stats.dense) {
        return absl::InternalError(absl::StrCat(method.label, ": step ", step, " was dense"));
      }
      samples[step - 1][rank] = {result->compute_seconds, stats.phases};
    }
    // Waits for the mask exchange in flight, so no collective outlives the group.
    return (*trainer)->optimizer().SaveState().status();
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      status[r] = rank_main(r);
      if (!status[r].ok()) {
        optimizer_hub.Abort(absl::AbortedError("another rank stopped"));
        control_hub.Abort(absl::AbortedError("another rank stopped"));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok() && !absl::IsAborted(s)) return s;
  }
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return samples;
}

StepSample RankMean(const std::vector<StepSample>& ranks) {
  StepSample mean;
  const double w = 1.0 / ranks.size();
  for (const StepSample& s : ranks) {
    mean.compute += w * s.compute;
    mean.phases.AddScaled(s.phases, w);
  }
  return mean;
}

void PrintRow(const std::string& label, const std::string& step, const StepSample& s) {
  const auto ms = [](double seconds) { return seconds * 1e3; };
  std::printf("%-10s %5s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f %11.1f %9.2f %9.2f\n",
              label.c_str(), step.c_str(), ms(s.phases.select), ms(s.phases.encode),
              ms(s.phases.pack), ms(s.phases.all_reduce_wait), ms(s.phases.mask_wait),
              ms(s.phases.update), ms(s.phases.OwnWork()), ms(s.compute),
              ms(s.phases.select_overlapped), ms(s.phases.coding_overlapped));
}

}  // namespace

int RunBenchmark() {
  scape_tool::DriverConfig base;
  if (absl::Status s = scape_tool::SetRunShapeFromFlags(base); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (base.data.empty()) {
    std::fprintf(stderr, "--data is required (`corescape data prepare` output)\n");
    return 2;
  }
  const optim::ScapeRule rule = base.scape.rule;
  const int32_t steps = absl::GetFlag(FLAGS_steps);
  base.steps = steps + 1;
  base.lr_warmup = 1;
  base.validate = false;

  std::vector<Method> methods;
  Method adams{"adams", base};
  adams.config.method = optim::OptimizerName(optim::OptimizerKind::kAdamS);
  methods.push_back(adams);
  // The shipped formulation (bench/scape/netns_wallclock.sh's flags), with
  // one dense step before the first mask.
  for (absl::string_view d : absl::StrSplit(absl::GetFlag(FLAGS_densities), ',')) {
    double density;
    if (!absl::SimpleAtod(d, &density) || !(density > 0 && density < 1)) {
      std::fprintf(stderr, "bad density '%s': must be in (0, 1)\n", std::string(d).c_str());
      return 2;
    }
    Method scape{absl::StrFormat("scape-%g", density), base};
    scape.config.method = optim::OptimizerName(optim::OptimizerKind::kScape);
    scape.config.scape.density = density;
    scape.config.scape.statistic = optim::MaskStatistic::kMomentumPlusScaledResidual;
    scape.config.scape.catch_up_exponent = 0.65;
    scape.config.scape.dense_warmup_steps = 1;
    methods.push_back(scape);
  }

  std::printf("SCAPE step breakdown, %s, model %s, P=%d in-process ranks, micro_batch %d x seq %d,"
              " rule %s, %d timed steps x %d rounds, mask encoded on %s; ms, mean over ranks\n",
              absl::FormatTime("%Y-%m-%d %H:%M UTC", absl::Now(), absl::UTCTimeZone()).c_str(),
              base.model.c_str(), base.ranks, base.micro_batch, base.seq_len,
              optim::ScapeRuleName(rule), steps, absl::GetFlag(FLAGS_rounds),
              absl::GetFlag(FLAGS_shared_group) ? "the step's thread (shared group)"
                                                : "the exchange's thread (control group)");
  std::printf("%-10s %5s %9s %9s %9s %9s %9s %9s %10s %11s %9s %9s\n", "method", "step", "select",
              "encode", "pack", "allreduce", "mask_wait", "update", "own_work", "fwd+bwd",
              "sel_bg", "code_bg");
  std::map<std::string, std::vector<StepSample>> all;
  for (int32_t round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    for (const Method& method : methods) {
      auto samples = RunMethod(method, steps);
      if (!samples.ok()) {
        std::fprintf(stderr, "%s: %s\n", method.label.c_str(),
                     std::string(samples.status().message()).c_str());
        return 1;
      }
      for (int32_t step = 0; step < steps; ++step) {
        const StepSample mean = RankMean((*samples)[step]);
        PrintRow(method.label, absl::StrCat(step + 1), mean);
        all[method.label].push_back(mean);
      }
    }
  }

  std::printf("\nmeans per step (ms); own_work = select + encode + pack + update on the step's"
              " thread;\nsel_bg = selection run beside the all-reduce and update (not in"
              " own_work);\ncode_bg = mask coding on the exchange's thread beside the next"
              " forward/backward (not in own_work);\nshare = own_work / dense AdamS's step compute (fwd+bwd + update);\npaired = own_work / (this"
              " method's own fwd+bwd + dense AdamS's update): the same model and batch timed\nin"
              " the same minutes as own_work, so less exposed to load drifting between methods\n");
  std::printf("%-10s %5s %9s %9s %9s %9s %9s %9s %10s %11s %9s %9s %7s %7s\n", "method", "",
              "select", "encode", "pack", "allreduce", "mask_wait", "update", "own_work",
              "fwd+bwd", "sel_bg", "code_bg", "share", "paired");
  const StepSample dense = RankMean(all["adams"]);
  const double dense_step_compute = dense.compute + dense.phases.update;
  std::map<double, double> share_at;
  for (const Method& method : methods) {
    const StepSample mean = RankMean(all[method.label]);
    const bool is_dense = method.label == "adams";
    const double share = is_dense ? 0.0 : mean.phases.OwnWork() / dense_step_compute;
    const double paired =
        is_dense ? 0.0 : mean.phases.OwnWork() / (mean.compute + dense.phases.update);
    std::printf("%-10s %5s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f %11.1f %9.2f %9.2f %7.4f %7.4f\n",
                method.label.c_str(), "mean", mean.phases.select * 1e3, mean.phases.encode * 1e3,
                mean.phases.pack * 1e3, mean.phases.all_reduce_wait * 1e3,
                mean.phases.mask_wait * 1e3, mean.phases.update * 1e3,
                mean.phases.OwnWork() * 1e3, mean.compute * 1e3,
                mean.phases.select_overlapped * 1e3, mean.phases.coding_overlapped * 1e3, share,
                paired);
    if (method.label != "adams") share_at[method.config.scape.density] = share;
  }
  std::printf("dense AdamS step compute (fwd+bwd + update): %.1f ms\n", dense_step_compute * 1e3);
  const auto share_or_null = [&](double density) {
    auto it = share_at.find(density);
    return it == share_at.end() ? std::string("null") : absl::StrFormat("%.4f", it->second);
  };
  std::printf("{\"overhead_share_99\": %s, \"overhead_share_90\": %s}\n",
              share_or_null(0.01).c_str(), share_or_null(0.1).c_str());
  return 0;
}

}  // namespace corescape::bench
