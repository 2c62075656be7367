#include "client/cli/rendering/watch_printer.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/cli/rendering/job_output.h"
#include "client/cli/rendering/output.h"
#include "client/cli/rendering/progress_bar.h"
#include "runtime/base/printable_text.h"

namespace corescape::cli {

namespace v1 = ::corescape::v1;

namespace {

constexpr const char* kClearToEndOfLine = "\x1b[K";

bool HasValidationLoss(double loss) { return loss > 0 || std::isnan(loss); }

// The job's own average, labelled; from a scheduler that does not count it,
// the newest step's rate, labelled as such.
std::string ThroughputText(const v1::JobProgress& progress) {
  if (const double average = AverageTokensPerSecond(progress); average > 0) {
    return absl::StrCat(FormatTokensPerSecond(average), " tokens/s (average over ",
                        FormatThousands(progress.steps_timed()),
                        progress.steps_timed() == 1 ? " step)" : " steps)");
  }
  if (progress.tokens_per_second() > 0) {
    return absl::StrCat(FormatTokensPerSecond(progress.tokens_per_second()),
                        " tokens/s (last step)");
  }
  return "- tokens/s";
}

}  // namespace

std::string RenderStateLine(const std::string& job_id, v1::JobState state,
                            const std::string& message) {
  std::string line =
      absl::StrCat("job ", EscapeUnsafeCharacters(job_id), " ", JobStateName(state));
  if (!message.empty()) absl::StrAppend(&line, ": ", EscapeUnsafeCharacters(message));
  return line;
}

std::string RenderJobSummary(const v1::Job& job) {
  const v1::JobProgress& progress = job.progress();
  std::string first = absl::StrCat("job ", job.job_id(), " ",
                                   JobStateName(job.state()), ": ",
                                   progress.step());
  const int64_t total =
      progress.total_steps() > 0 ? progress.total_steps() : job.spec().steps();
  if (total > 0) absl::StrAppend(&first, "/", total);
  absl::StrAppend(&first, " steps");
  if (job.started_unix_ms() > 0 && job.finished_unix_ms() >= job.started_unix_ms()) {
    absl::StrAppend(&first, " in ",
                    FormatShortDuration(absl::Milliseconds(
                        job.finished_unix_ms() - job.started_unix_ms())));
  }
  if (job.state() != v1::SUCCEEDED && !job.state_reason().empty()) {
    absl::StrAppend(&first, ": ", EscapeUnsafeCharacters(job.state_reason()));
  }
  std::string second =
      absl::StrCat("final loss ",
                   progress.step() > 0 ? FormatLoss(progress.loss()) : "-",
                   ", validation loss ",
                   HasValidationLoss(progress.validation_loss())
                       ? FormatLoss(progress.validation_loss())
                       : "-",
                   ", ", ThroughputText(progress));
  if (HasMfu(progress)) absl::StrAppend(&second, ", ", FormatMfu(progress.mfu()));
  std::string third = absl::StrCat(
      "communication: ", FormatBytes(progress.bytes_sent()), " sent, ",
      FormatBytes(progress.bytes_received()), " received");
  return absl::StrCat(first, "\n", second, "\n", third, "\n");
}

WatchPrinter::WatchPrinter(std::ostream& out, WatchDisplay display,
                           std::string job_id)
    : out_(out), display_(std::move(display)), job_id_(std::move(job_id)) {}

void WatchPrinter::OnEvent(const v1::JobEvent& event, absl::Time now) {
  if (!event.message().empty()) last_message_ = event.message();
  if (display_.json) {
    out_ << JobEventToJson(event).dump() << std::endl;
  }

  if (event.body_case() == v1::JobEvent::kProgress) {
    const v1::JobProgress& progress = event.progress();
    const double val = progress.validation_loss();
    const bool new_evaluation =
        HasValidationLoss(val) && !(val == previous_validation_loss_);
    previous_validation_loss_ = val;
    const double carried = latest_.validation_loss();
    latest_ = progress;
    if (!HasValidationLoss(val)) latest_.set_validation_loss(carried);
    has_progress_ = true;
    if (display_.json) return;

    const bool last_step =
        progress.total_steps() > 0 && progress.step() >= progress.total_steps();
    const absl::Duration interval =
        display_.tty ? display_.redraw_interval : display_.plain_interval;
    if (now - last_progress_output_ >= interval || last_step ||
        (new_evaluation && !display_.tty)) {
      last_progress_output_ = now;
      PrintProgress();
    } else {
      progress_pending_ = true;
    }
    return;
  }

  if (display_.json) return;
  if (event.body_case() == v1::JobEvent::BODY_NOT_SET && !event.message().empty()) {
    // What happened without a change of state (the checkpoint a recovery
    // restored).
    FlushPendingProgress();
    PrintLine(absl::StrCat("job ", EscapeUnsafeCharacters(job_id_), ": ",
                           EscapeUnsafeCharacters(event.message())));
    return;
  }
  if (event.body_case() != v1::JobEvent::kState) return;
  FlushPendingProgress();
  // The end is shown by Finish, as the summary.
  if (event.state() == v1::SUCCEEDED || event.state() == v1::FAILED ||
      event.state() == v1::CANCELLED) {
    return;
  }
  PrintLine(RenderStateLine(job_id_, event.state(), event.message()));
}

void WatchPrinter::PrintLine(const std::string& line) {
  if (display_.tty) {
    out_ << "\r" << line << kClearToEndOfLine << "\n";
    bar_on_screen_ = false;
    if (has_progress_) PrintProgress();
  } else {
    out_ << line << "\n";
  }
  out_.flush();
}

void WatchPrinter::PrintProgress() {
  progress_pending_ = false;
  if (display_.tty) {
    out_ << "\r" << RenderProgressBar(latest_, display_.width())
         << kClearToEndOfLine;
    bar_on_screen_ = true;
  } else {
    out_ << RenderProgressText(latest_) << "\n";
  }
  out_.flush();
}

void WatchPrinter::FlushPendingProgress() {
  if (progress_pending_) PrintProgress();
}

void WatchPrinter::ClearLine() {
  if (!display_.tty || !bar_on_screen_) return;
  out_ << "\r" << kClearToEndOfLine;
  out_.flush();
  bar_on_screen_ = false;
  progress_pending_ = has_progress_;
}

void WatchPrinter::Finish(const v1::Job& job) {
  v1::Job final_job = job;
  v1::JobProgress* progress = final_job.mutable_progress();
  if (has_progress_) {
    if (progress->step() == 0) *progress = latest_;
    if (!HasValidationLoss(progress->validation_loss())) {
      progress->set_validation_loss(latest_.validation_loss());
    }
  }
  if (final_job.job_id().empty()) final_job.set_job_id(job_id_);

  if (display_.json) {
    out_ << nlohmann::json{{"type", "finished"}, {"job", JobToJson(final_job)}}
                .dump()
         << std::endl;
    return;
  }
  if (display_.tty) {
    if (has_progress_) {
      out_ << "\r" << RenderProgressBar(latest_, display_.width())
           << kClearToEndOfLine << "\n";
    }
    bar_on_screen_ = false;
    progress_pending_ = false;
  } else {
    FlushPendingProgress();
  }
  out_ << RenderJobSummary(final_job);
  out_.flush();
}

}  // namespace corescape::cli
