// What `corescape watch` (and `submit --wait`) shows while it follows a
// job: a progress bar redrawn in place on a terminal, one plain line per
// progress event (at most one per plain_interval) otherwise, or one JSON
// object per event per line; state changes on their own lines; and a
// summary at the end. Writes to the given stream; the clock is a parameter.
#ifndef CORESCAPE_CLIENT_CLI_RENDERING_WATCH_PRINTER_H_
#define CORESCAPE_CLIENT_CLI_RENDERING_WATCH_PRINTER_H_

#include <functional>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "corescape/v1/job.pb.h"

namespace corescape::cli {

struct WatchDisplay {
  bool json = false;
  bool tty = false;  // redraw the progress line with '\r'
  std::function<int()> width = [] { return 80; };  // terminal columns
  absl::Duration plain_interval = absl::Milliseconds(500);
  absl::Duration redraw_interval = absl::Milliseconds(100);
};

// "job J STATE" and ": message" when there is one.
std::string RenderStateLine(const std::string& job_id,
                            corescape::v1::JobState state,
                            const std::string& message);

// The end of a watch, three lines:
//   job J SUCCEEDED: 300/300 steps in 2m10s
//   final loss 2.310, validation loss 2.450, 12,345 tokens/s (average over 300 steps)
//   communication: 1.2 MiB sent, 1.2 MiB received
// FAILED and CANCELLED jobs add ": <state_reason>" to the first line. The
// tokens/s is the job's own average (AverageTokensPerSecond), not its last
// step's rate, which only a scheduler that does not count the average gives
// ("(last step)").
std::string RenderJobSummary(const corescape::v1::Job& job);

class WatchPrinter {
 public:
  WatchPrinter(std::ostream& out, WatchDisplay display, std::string job_id);

  void OnEvent(const corescape::v1::JobEvent& event, absl::Time now);

  // Erases the progress bar from the terminal line so that something else
  // (a warning on stderr) can be written; the next progress redraws it.
  void ClearLine();

  // Shows the last progress and the summary of `job` (the scheduler's
  // final answer). Progress fields the job lacks (no step, no validation
  // loss) are taken from the events seen.
  void Finish(const corescape::v1::Job& job);

  // The latest progress seen; its validation loss is the last one
  // evaluated (carried across events that have none).
  const corescape::v1::JobProgress& latest_progress() const { return latest_; }
  bool has_progress() const { return has_progress_; }
  const std::string& last_message() const { return last_message_; }

 private:
  void PrintProgress();
  // One line of its own, above the progress bar when there is one.
  void PrintLine(const std::string& line);
  void FlushPendingProgress();

  std::ostream& out_;
  const WatchDisplay display_;
  const std::string job_id_;
  corescape::v1::JobProgress latest_;
  bool has_progress_ = false;
  double previous_validation_loss_ = 0;  // as the last event carried it
  bool progress_pending_ = false;        // a progress event not shown yet
  bool bar_on_screen_ = false;
  absl::Time last_progress_output_ = absl::InfinitePast();
  std::string last_message_;
};

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_RENDERING_WATCH_PRINTER_H_
