// The loss curve of a job, collected from its progress events, written as
// CSV (step,train_loss,val_loss,tokens_per_s) and as an SVG plot.
#ifndef CORESCAPE_CLIENT_CLI_RENDERING_LOSS_CURVE_H_
#define CORESCAPE_CLIENT_CLI_RENDERING_LOSS_CURVE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/cli/rendering/svg_plot.h"
#include "corescape/v1/job.pb.h"

namespace corescape::cli {

struct LossPoint {
  int64_t step = 0;
  double train_loss = 0;
  std::optional<double> val_loss;  // only at steps that were evaluated
  double tokens_per_second = 0;
};

class LossCurve {
 public:
  // `eval_interval` (the spec's eval_interval_steps, 0 if unknown) helps
  // recognise an evaluation whose loss equals the previous one.
  explicit LossCurve(int64_t eval_interval = 0) : eval_interval_(eval_interval) {}

  // One progress event. A validation loss counts as a new evaluation when
  // it is positive (or NaN) and differs from the previous event's, or falls
  // on a multiple of the eval interval. A step at or below the last one
  // (the job resumed from a checkpoint) drops the points from that step on:
  // the resumed run's values replace them.
  void Add(const corescape::v1::JobProgress& progress);

  const std::vector<LossPoint>& points() const { return points_; }

 private:
  int64_t eval_interval_;
  double previous_validation_loss_ = 0;
  std::vector<LossPoint> points_;
};

// Header plus one row per point; val_loss empty where not evaluated;
// non-finite values as "nan", "inf", "-inf".
std::string RenderLossCsv(const std::vector<LossPoint>& points);

// Train loss (line) and validation loss (line with markers) against step.
LinePlot MakeLossPlot(const std::vector<LossPoint>& points,
                      const std::string& title);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_RENDERING_LOSS_CURVE_H_
