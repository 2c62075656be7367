// `corescape plot JOB --csv FILE --svg FILE`: the job's loss curve, read
// from WatchJob's replay of its progress events (after_sequence 0).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli/common.h"
#include "client/cli/commands/process.h"
#include "client/cli/rendering/loss_curve.h"
#include "client/cli/rendering/svg_plot.h"
#include "client/cli/commands/watch.h"
#include "client/job_watch.h"

namespace corescape::cli {

namespace {

struct PlotOptions {
  std::string job_id;
  std::string csv_path;
  std::string svg_path;
  bool follow = false;
  WatchFlags watch;  // watch.json is --json
};

int PlotJob(const PlotOptions& options, client::SchedulerClient& client,
            const SchedulerTarget& target) {
  int exit_code = kExitOk;
  std::optional<v1::Job> fetched = GetJobOrFail(client, target, options.job_id, &exit_code);
  if (!fetched) return exit_code;
  const v1::Job& job = *fetched;

  // The replay ends with the job's end; for a job still running, stop once
  // the replay reaches the step GetJob reported (unless --follow).
  const bool ended = client::IsTerminalJobState(job.state());
  const int64_t known_step = job.progress().step();
  LossCurve curve(job.spec().eval_interval_steps());
  if (ended || options.follow || known_step > 0) {
    client::WatchJobCallbacks callbacks;
    callbacks.on_event = [&](const v1::JobEvent& event) {
      if (event.body_case() != v1::JobEvent::kProgress) {
        return client::WatchAction::kContinue;
      }
      curve.Add(event.progress());
      const bool caught_up =
          !ended && !options.follow && event.progress().step() >= known_step;
      return caught_up ? client::WatchAction::kStop
                       : client::WatchAction::kContinue;
    };
    callbacks.on_reconnecting = [&](const absl::Status& why, int attempt) {
      if (attempt == 1) {
        Warn(absl::StrCat("lost the event stream of job ", options.job_id,
                          " (", why.message(), "); reconnecting"));
      }
    };
    absl::StatusOr<client::WatchJobResult> result = client::WatchJob(
        client, MakeWatchJobOptions(options.job_id, options.watch), callbacks);
    if (!result.ok()) return FailRpc(result.status(), target, "WatchJob");
  }

  const std::string name = job.spec().name();
  const std::string title = absl::StrCat(
      "loss of job ", options.job_id, name.empty() ? "" : " (" + name + ")");
  if (!options.csv_path.empty()) {
    if (absl::Status status =
            WriteFileAtomically(options.csv_path, RenderLossCsv(curve.points()));
        !status.ok()) {
      return Fail(kExitFailure, status.message());
    }
  }
  if (!options.svg_path.empty()) {
    if (absl::Status status = WriteFileAtomically(
            options.svg_path,
            RenderLinePlotSvg(MakeLossPlot(curve.points(), title)));
        !status.ok()) {
      return Fail(kExitFailure, status.message());
    }
  }

  int evaluations = 0;
  for (const LossPoint& point : curve.points()) {
    if (point.val_loss.has_value()) ++evaluations;
  }
  if (options.watch.json) {
    PrintJson({{"job_id", options.job_id},
               {"points", curve.points().size()},
               {"validation_points", evaluations},
               {"csv", options.csv_path},
               {"svg", options.svg_path}});
  } else {
    std::string written;
    if (!options.csv_path.empty()) written = options.csv_path;
    if (!options.svg_path.empty()) {
      absl::StrAppend(&written, written.empty() ? "" : " and ", options.svg_path);
    }
    std::cout << "wrote " << curve.points().size() << " steps ("
              << evaluations << " with validation loss) of job "
              << options.job_id << " to " << written << std::endl;
  }
  return kExitOk;
}

// A usage error is reported before connecting.
int RunPlot(const PlotOptions& options, const GlobalOptions& globals) {
  if (options.csv_path.empty() && options.svg_path.empty()) {
    return Fail(kExitUsage, "give --csv FILE and/or --svg FILE");
  }
  return RunWithScheduler(
      globals, [&](client::SchedulerClient& client, const SchedulerTarget& target) {
        return PlotJob(options, client, target);
      });
}

}  // namespace

Subcommand AddPlotCommand(CLI::App& parent, GlobalOptions& globals) {
  auto plot = AddSchedulerCommand<PlotOptions>(
      parent, globals, "plot",
      "Write a job's loss curve as CSV (step,train_loss,val_loss,"
      "tokens_per_s) and/or as an SVG plot");
  PlotOptions& options = *plot.options;
  AddJobArgument(*plot.app, options.job_id);
  plot.app->add_option("--csv", options.csv_path, "CSV file to write")->type_name("FILE");
  plot.app->add_option("--svg", options.svg_path, "SVG file to write")->type_name("FILE");
  plot.app->add_flag("--follow", options.follow,
                     "For a job still running: wait until it ends (default: "
                     "plot what it has done so far)");
  plot.app->add_flag("--json", options.watch.json, "Print what was written as a JSON object");
  AddWatchFlags(*plot.app, options.watch);
  return {plot.app, [options = plot.options, &globals]() { return RunPlot(*options, globals); }};
}

}  // namespace corescape::cli
