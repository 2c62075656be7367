// `corescape watch JOB`: follow a job's events (WatchJob) until it ends,
// and what `corescape submit --wait` shares with it.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cli/common.h"
#include "client/cli/rendering/job_output.h"
#include "client/cli/commands/watch.h"
#include "client/cli/rendering/watch_printer.h"

namespace corescape::cli {

namespace {

int TerminalWidth() {
  winsize size{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  int columns = 0;
  if (const char* env = std::getenv("COLUMNS");
      env != nullptr && absl::SimpleAtoi(env, &columns) && columns > 0) {
    return columns;
  }
  return 80;
}

}  // namespace

void AddWatchFlags(CLI::App& command, WatchFlags& flags) {
  command
      .add_option("--reconnect-timeout", flags.reconnect_timeout_seconds,
                  "When the event stream breaks, keep reconnecting this long "
                  "before giving up (exit 3)")
      ->type_name("SECONDS")
      ->check(PositiveSeconds())
      ->capture_default_str();
  // How long the stream may stay quiet before a GetJob probe checks that
  // the scheduler still answers. Hidden: tests shorten it.
  command.add_option("--probe-interval", flags.probe_interval_seconds)
      ->check(PositiveSeconds())
      ->group("");
}

client::WatchJobOptions MakeWatchJobOptions(const std::string& job_id,
                                            const WatchFlags& flags) {
  client::WatchJobOptions options;
  options.job_id = job_id;
  options.reconnect_timeout = absl::Seconds(flags.reconnect_timeout_seconds);
  options.probe_interval = absl::Seconds(flags.probe_interval_seconds);
  return options;
}

int WatchUntilEnd(client::SchedulerClient& client, const SchedulerTarget& target,
                  const v1::Job& job, uint64_t after_sequence,
                  const WatchFlags& flags) {
  WatchDisplay display;
  display.json = flags.json;
  display.tty = !flags.json && isatty(STDOUT_FILENO) == 1;
  display.width = TerminalWidth;
  WatchPrinter printer(std::cout, display, job.job_id());

  client::WatchJobOptions options = MakeWatchJobOptions(job.job_id(), flags);
  options.after_sequence = after_sequence;
  client::WatchJobCallbacks callbacks;
  callbacks.on_event = [&printer](const v1::JobEvent& event) {
    printer.OnEvent(event, absl::Now());
    return client::WatchAction::kContinue;
  };
  callbacks.on_reconnecting = [&](const absl::Status& why, int attempt) {
    if (attempt != 1) return;
    printer.ClearLine();
    Warn(absl::StrCat("lost the event stream of job ", job.job_id(), " (",
                      why.message(), "); reconnecting for up to ",
                      absl::FormatDuration(options.reconnect_timeout)));
  };
  absl::StatusOr<client::WatchJobResult> result =
      client::WatchJob(client, options, callbacks);
  if (!result.ok()) {
    printer.ClearLine();
    return FailRpc(result.status(), target, "WatchJob");
  }

  // The summary comes from the scheduler's final view of the job when it
  // answers, else from what the events showed.
  v1::Job final_job = job;
  v1::GetJobRequest request;
  request.set_job_id(job.job_id());
  absl::StatusOr<v1::GetJobResponse> answer = client.GetJob(request);
  if (answer.ok()) final_job = answer->job();
  if (!answer.ok() || final_job.state() != result->final_state) {
    final_job.set_state(result->final_state);
    final_job.set_state_reason(printer.last_message());
  }
  printer.Finish(final_job);

  const std::string reason =
      final_job.state_reason().empty() ? "" : ": " + final_job.state_reason();
  switch (final_job.state()) {
    case v1::SUCCEEDED:
      return kExitOk;
    case v1::CANCELLED:
      return Fail(kExitFailure,
                  absl::StrCat("job ", job.job_id(), " was CANCELLED", reason));
    default:
      return Fail(kExitFailure,
                  absl::StrCat("job ", job.job_id(), " ",
                               JobStateName(final_job.state()), reason));
  }
}

namespace {

struct WatchCommandOptions {
  std::string job_id;
  uint64_t after_sequence = 0;
  WatchFlags flags;
};

int RunWatch(const WatchCommandOptions& options, client::SchedulerClient& client,
             const SchedulerTarget& target) {
  int exit_code = kExitOk;
  std::optional<v1::Job> fetched = GetJobOrFail(client, target, options.job_id, &exit_code);
  if (!fetched) return exit_code;
  v1::Job job = *std::move(fetched);
  if (job.job_id().empty()) job.set_job_id(options.job_id);
  return WatchUntilEnd(client, target, job, options.after_sequence, options.flags);
}

}  // namespace

Subcommand AddWatchCommand(CLI::App& parent, GlobalOptions& globals) {
  auto watch = AddSchedulerCommand<WatchCommandOptions>(
      parent, globals, "watch",
      "Follow a job until it ends: live progress, state changes, summary. "
      "Exit 0 only if it SUCCEEDED");
  AddJobArgument(*watch.app, watch.options->job_id);
  watch.app->add_flag("--json", watch.options->flags.json,
                      "One JSON object per event per line, then "
                      "{\"type\": \"finished\", \"job\": ...}");
  watch.app
      ->add_option("--after-sequence", watch.options->after_sequence,
                   "Only events after this sequence number (default: the "
                   "job's whole history)")
      ->type_name("N");
  AddWatchFlags(*watch.app, watch.options->flags);
  return watch.RunsWith(RunWatch);
}

}  // namespace corescape::cli
