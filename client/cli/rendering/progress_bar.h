// The one-line view of a job's progress used by `corescape watch`:
//   [#####.....] step 120/400  loss 2.310  val 2.450  12,345 tok/s  ETA 1m20s
// Pure functions: the same progress and width always give the same line.
#ifndef CORESCAPE_CLIENT_CLI_RENDERING_PROGRESS_BAR_H_
#define CORESCAPE_CLIENT_CLI_RENDERING_PROGRESS_BAR_H_

#include <string>

#include "corescape/v1/job.pb.h"

namespace corescape::cli {

// "step 120/400  loss 2.310  val 2.450  12,345 tok/s  ETA 1m20s". Fields
// the progress does not have yet are left out: val before the first
// evaluation (validation_loss 0), tok/s when 0, ETA when unknown (0) or
// when the last step is done; "/400" when total_steps is 0.
std::string RenderProgressText(const corescape::v1::JobProgress& progress);

// The text behind a bar of '#' (done) and '.' (to do), the whole line at
// most width - 1 characters (so a terminal never wraps it). The bar is
// between 10 and 30 cells and is dropped when the width leaves no room for
// 10 cells, or when total_steps is 0; the text is cut at the width.
std::string RenderProgressBar(const corescape::v1::JobProgress& progress,
                              int width);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_RENDERING_PROGRESS_BAR_H_
