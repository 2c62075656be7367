#include "client/cli/rendering/progress_bar.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "client/cli/rendering/job_output.h"

namespace corescape::cli {

std::string RenderProgressText(const corescape::v1::JobProgress& progress) {
  std::string text = absl::StrCat("step ", progress.step());
  if (progress.total_steps() > 0) absl::StrAppend(&text, "/", progress.total_steps());
  absl::StrAppend(&text, "  loss ", FormatLoss(progress.loss()));
  const double val = progress.validation_loss();
  if (val > 0 || std::isnan(val)) absl::StrAppend(&text, "  val ", FormatLoss(val));
  if (progress.tokens_per_second() > 0) {
    absl::StrAppend(&text, "  ", FormatTokensPerSecond(progress.tokens_per_second()), " tok/s");
  }
  if (HasMfu(progress)) absl::StrAppend(&text, "  ", FormatMfu(progress.mfu()));
  const bool finished =
      progress.total_steps() > 0 && progress.step() >= progress.total_steps();
  if (!finished && progress.eta_seconds() > 0) {
    absl::StrAppend(&text, "  ETA ", FormatEta(progress.eta_seconds()));
  }
  return text;
}

std::string RenderProgressBar(const corescape::v1::JobProgress& progress,
                              int width) {
  constexpr int kMinCells = 10;
  constexpr int kMaxCells = 30;
  const std::string text = RenderProgressText(progress);
  const int usable = std::max(0, width - 1);  // never write the last column
  std::string line;
  // "[" cells "] " text
  const int cells = std::min(kMaxCells, usable - static_cast<int>(text.size()) - 3);
  if (progress.total_steps() > 0 && cells >= kMinCells) {
    const double fraction =
        std::clamp(static_cast<double>(progress.step()) /
                       static_cast<double>(progress.total_steps()),
                   0.0, 1.0);
    const int done = static_cast<int>(std::floor(fraction * cells));
    line = absl::StrCat("[", std::string(done, '#'),
                        std::string(cells - done, '.'), "] ");
  }
  line += text;
  if (static_cast<int>(line.size()) > usable) line.resize(usable);
  return line;
}

}  // namespace corescape::cli
