// The progress line of `corescape watch` (a pure function of progress and
// width) and the watch output around it: TTY redraws, plain lines with
// throttling, JSON lines, state lines and the summary.
#include "client/cli/rendering/progress_bar.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "client/cli/rendering/watch_printer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace corescape::cli {
namespace {

namespace v1 = ::corescape::v1;

v1::JobProgress Progress(int64_t step, int64_t total, double loss, double val,
                         double tokens_per_second, double eta_seconds) {
  v1::JobProgress progress;
  progress.set_step(step);
  progress.set_total_steps(total);
  progress.set_loss(loss);
  progress.set_validation_loss(val);
  progress.set_tokens_per_second(tokens_per_second);
  progress.set_eta_seconds(eta_seconds);
  return progress;
}

TEST(ProgressTextTest, AllFields) {
  EXPECT_EQ(RenderProgressText(Progress(120, 400, 2.31, 2.45, 12345.4, 80)),
            "step 120/400  loss 2.310  val 2.450  12,345 tok/s  ETA 1m20s");
}

TEST(ProgressTextTest, LeavesOutWhatIsNotKnownYet) {
  EXPECT_EQ(RenderProgressText(Progress(3, 400, 5.5, 0, 0, 0)),
            "step 3/400  loss 5.500");
  EXPECT_EQ(RenderProgressText(Progress(3, 0, 5.5, 0, 999, 0)),
            "step 3  loss 5.500  999 tok/s");
  // Done: no ETA.
  EXPECT_EQ(RenderProgressText(Progress(400, 400, 2.0, 2.1, 1000, 5)),
            "step 400/400  loss 2.000  val 2.100  1,000 tok/s");
  EXPECT_EQ(RenderProgressText(Progress(7, 10, std::nan(""), std::nan(""), 10, 3661)),
            "step 7/10  loss nan  val nan  10 tok/s  ETA 1h01m");
}

TEST(ProgressBarTest, BarFillsWithTheFractionDone) {
  const v1::JobProgress progress = Progress(120, 400, 2.31, 2.45, 12345, 80);
  const std::string text =
      "step 120/400  loss 2.310  val 2.450  12,345 tok/s  ETA 1m20s";
  // Wide terminal: 30 cells, 30% done = 9 cells.
  EXPECT_EQ(RenderProgressBar(progress, 200),
            "[#########.....................] " + text);
  // Narrower: the bar shrinks to what is left (width - 1 - text - 3).
  const int width = static_cast<int>(text.size()) + 3 + 1 + 10;
  EXPECT_EQ(RenderProgressBar(progress, width), "[###.......] " + text);
  // Too narrow for 10 cells: no bar, the text cut at width - 1.
  EXPECT_EQ(RenderProgressBar(progress, 20), text.substr(0, 19));
  EXPECT_EQ(RenderProgressBar(Progress(0, 10, 9, 0, 0, 0), 80),
            "[..............................] step 0/10  loss 9.000");
  EXPECT_EQ(RenderProgressBar(Progress(10, 10, 1, 0, 0, 0), 80),
            "[##############################] step 10/10  loss 1.000");
  // Overshoot and unknown totals never break the bar.
  EXPECT_EQ(RenderProgressBar(Progress(12, 10, 1, 0, 0, 0), 80).substr(0, 32),
            "[##############################]");
  EXPECT_EQ(RenderProgressBar(Progress(5, 0, 1, 0, 0, 0), 80),
            "step 5  loss 1.000");
  for (int width : {0, 1, 5, 40, 81}) {
    EXPECT_LE(RenderProgressBar(progress, width).size(),
              static_cast<size_t>(std::max(0, width - 1)));
  }
}

v1::JobEvent StateEvent(uint64_t sequence, v1::JobState state,
                        const std::string& message = "") {
  v1::JobEvent event;
  event.set_sequence(sequence);
  event.set_job_id("j-1");
  event.set_unix_ms(1700000000000 + sequence);
  event.set_state(state);
  event.set_message(message);
  return event;
}

v1::JobEvent ProgressEvent(uint64_t sequence, int64_t step, double val = 0) {
  v1::JobEvent event;
  event.set_sequence(sequence);
  event.set_job_id("j-1");
  event.set_unix_ms(1700000000000 + sequence);
  *event.mutable_progress() = Progress(step, 4, 5.0 - step, val, 1000, 4 - step);
  return event;
}

v1::Job FinalJob(v1::JobState state, const std::string& reason = "") {
  v1::Job job;
  job.set_job_id("j-1");
  job.set_state(state);
  job.set_state_reason(reason);
  job.set_started_unix_ms(1700000000000);
  job.set_finished_unix_ms(1700000130000);
  *job.mutable_progress() = Progress(4, 4, 1.0, 1.5, 2500, 0);
  job.mutable_progress()->set_bytes_sent(3 * 1024 * 1024);
  job.mutable_progress()->set_bytes_received(1536);
  // The job's own average (40,000 tokens in 8 s) is not its last step's
  // rate (2,500 tokens/s).
  job.mutable_progress()->set_tokens_trained(40000);
  job.mutable_progress()->set_steps_seconds(8.0);
  job.mutable_progress()->set_steps_timed(4);
  return job;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

TEST(WatchPrinterTest, PlainOutputThrottlesProgressAndFlushesBeforeStates) {
  std::ostringstream out;
  WatchDisplay display;  // not a TTY
  WatchPrinter printer(out, display, "j-1");
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  printer.OnEvent(StateEvent(1, v1::PENDING, "waiting for 2 workers"), t0);
  printer.OnEvent(StateEvent(2, v1::RUNNING), t0);
  printer.OnEvent(ProgressEvent(3, 1), t0);                             // shown
  printer.OnEvent(ProgressEvent(4, 2), t0 + absl::Milliseconds(100));   // held
  printer.OnEvent(StateEvent(5, v1::RECOVERING, "worker-1 lost"),
                  t0 + absl::Milliseconds(200));  // flushes step 2 first
  printer.OnEvent(ProgressEvent(6, 3, 2.5), t0 + absl::Milliseconds(300));  // eval: shown
  printer.OnEvent(ProgressEvent(7, 4), t0 + absl::Milliseconds(310));  // last: shown
  printer.OnEvent(StateEvent(8, v1::SUCCEEDED), t0 + absl::Milliseconds(320));
  printer.Finish(FinalJob(v1::SUCCEEDED));
  EXPECT_EQ(Lines(out.str()),
            (std::vector<std::string>{
                "job j-1 PENDING: waiting for 2 workers",
                "job j-1 RUNNING",
                "step 1/4  loss 4.000  1,000 tok/s  ETA 3s",
                "step 2/4  loss 3.000  1,000 tok/s  ETA 2s",
                "job j-1 RECOVERING: worker-1 lost",
                "step 3/4  loss 2.000  val 2.500  1,000 tok/s  ETA 1s",
                "step 4/4  loss 1.000  val 2.500  1,000 tok/s",
                "job j-1 SUCCEEDED: 4/4 steps in 2m10s",
                "final loss 1.000, validation loss 1.500, 5,000 tokens/s (average over 4 steps)",
                "communication: 3.0 MiB sent, 1.5 KiB received",
            }));
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
}

TEST(WatchPrinterTest, TtyRedrawsOneLineAndKeepsStatesAbove) {
  std::ostringstream out;
  WatchDisplay display;
  display.tty = true;
  display.width = [] { return 60; };
  WatchPrinter printer(out, display, "j-1");
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  printer.OnEvent(ProgressEvent(1, 1), t0);
  printer.OnEvent(ProgressEvent(2, 2), t0 + absl::Seconds(1));
  printer.OnEvent(StateEvent(3, v1::RECOVERING, "worker-1 lost"), t0 + absl::Seconds(2));
  printer.OnEvent(ProgressEvent(4, 4), t0 + absl::Seconds(3));
  printer.OnEvent(StateEvent(5, v1::FAILED, "no checkpoint"), t0 + absl::Seconds(4));
  printer.Finish(FinalJob(v1::FAILED, "no checkpoint"));
  const std::string text = out.str();
  // Progress redraws start with '\r' and clear the rest of the line.
  EXPECT_TRUE(absl::StrContains(
      text, "\r[###............] step 1/4  loss 4.000  1,000 tok/s  ETA 3s\x1b[K"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "\rjob j-1 RECOVERING: worker-1 lost\x1b[K\n"));
  EXPECT_TRUE(absl::StrContains(
      text, "\r[" + std::string(23, '#') +
                "] step 4/4  loss 1.000  1,000 tok/s\x1b[K\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, "job j-1 FAILED: 4/4 steps in 2m10s: no checkpoint\n"));
  // No redrawn line is as wide as the terminal.
  for (absl::string_view line : absl::StrSplit(text, absl::ByAnyChar("\r\n"))) {
    if (!absl::EndsWith(line, "\x1b[K")) continue;
    EXPECT_LT(line.size() - 3, 60u) << line;
  }
}

TEST(WatchPrinterTest, JsonIsOneObjectPerEventThenTheFinishedJob) {
  std::ostringstream out;
  WatchDisplay display;
  display.json = true;
  WatchPrinter printer(out, display, "j-1");
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  printer.OnEvent(StateEvent(1, v1::RUNNING), t0);
  printer.OnEvent(ProgressEvent(2, 1), t0);
  printer.OnEvent(ProgressEvent(3, 2), t0);  // not throttled
  printer.OnEvent(StateEvent(4, v1::SUCCEEDED), t0);
  printer.Finish(FinalJob(v1::SUCCEEDED));
  const std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 5);
  const nlohmann::json first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["type"], "state");
  EXPECT_EQ(first["state"], "RUNNING");
  EXPECT_EQ(first["sequence"], 1);
  const nlohmann::json progress = nlohmann::json::parse(lines[2]);
  EXPECT_EQ(progress["type"], "progress");
  EXPECT_EQ(progress["progress"]["step"], 2);
  EXPECT_EQ(progress["progress"]["total_steps"], 4);
  const nlohmann::json last = nlohmann::json::parse(lines[4]);
  EXPECT_EQ(last["type"], "finished");
  EXPECT_EQ(last["job"]["state"], "SUCCEEDED");
  EXPECT_EQ(last["job"]["progress"]["bytes_sent"], 3 * 1024 * 1024);
}

TEST(WatchPrinterTest, SummaryFillsWhatTheFinalJobLacksFromTheEvents) {
  std::ostringstream out;
  WatchPrinter printer(out, WatchDisplay{}, "j-9");
  printer.OnEvent(ProgressEvent(1, 3, 2.75), absl::FromUnixSeconds(1));
  printer.OnEvent(ProgressEvent(2, 4), absl::FromUnixSeconds(2));
  v1::Job bare;  // the scheduler did not answer GetJob at the end
  bare.set_state(v1::CANCELLED);
  bare.set_state_reason("cancelled by operator");
  printer.Finish(bare);
  EXPECT_TRUE(absl::StrContains(
      out.str(), "job j-9 CANCELLED: 4/4 steps: cancelled by operator\n"
                 "final loss 1.000, validation loss 2.750, 1,000 tokens/s (last step)\n"));
}

// The summary's throughput is the job's tokens over the wall time of its
// steps, whatever the last step's rate was; without the scheduler's count
// (an older scheduler) it is the last step's, and says so.
TEST(RenderJobSummaryTest, ThroughputIsTheJobsAverageNotTheLastStep) {
  v1::Job job = FinalJob(v1::SUCCEEDED);
  job.mutable_progress()->set_step(300);
  job.mutable_progress()->set_total_steps(300);
  job.mutable_progress()->set_tokens_per_second(6434);  // the slow last step
  job.mutable_progress()->set_tokens_trained(307200);
  job.mutable_progress()->set_steps_seconds(16.8);
  job.mutable_progress()->set_steps_timed(300);
  EXPECT_EQ(Lines(RenderJobSummary(job))[1],
            "final loss 1.000, validation loss 1.500, 18,286 tokens/s (average over 300 steps)");

  job.mutable_progress()->set_steps_timed(1);
  EXPECT_TRUE(absl::StrContains(RenderJobSummary(job), "tokens/s (average over 1 step)"));

  for (double seconds : {0.0, -1.0, std::nan("")}) {
    job.mutable_progress()->set_steps_seconds(seconds);
    EXPECT_EQ(Lines(RenderJobSummary(job))[1],
              "final loss 1.000, validation loss 1.500, 6,434 tokens/s (last step)")
        << seconds;
  }
  job.mutable_progress()->set_tokens_per_second(0);
  EXPECT_EQ(Lines(RenderJobSummary(job))[1], "final loss 1.000, validation loss 1.500, - tokens/s");
}

// A job whose device's peak is known shows its MFU as it steps and in the
// summary.
TEST(WatchPrinterTest, MfuInTheStepLinesAndTheSummary) {
  std::ostringstream out;
  WatchPrinter printer(out, WatchDisplay{}, "j-1");
  v1::JobEvent step = ProgressEvent(4, 4);
  step.mutable_progress()->set_mfu(0.385);
  printer.OnEvent(step, absl::FromUnixSeconds(1));
  v1::Job done = FinalJob(v1::SUCCEEDED);
  done.mutable_progress()->set_mfu(0.3849);
  printer.Finish(done);
  EXPECT_TRUE(absl::StrContains(out.str(), "step 4/4  loss 1.000  1,000 tok/s  MFU 38.5%\n"))
      << out.str();
  EXPECT_TRUE(absl::StrContains(
      out.str(), "final loss 1.000, validation loss 1.500, 5,000 tokens/s (average over 4 steps), "
                 "MFU 38.5%\n"))
      << out.str();
}

}  // namespace
}  // namespace corescape::cli
