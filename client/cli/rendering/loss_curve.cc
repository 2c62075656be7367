#include "client/cli/rendering/loss_curve.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace corescape::cli {

void LossCurve::Add(const corescape::v1::JobProgress& progress) {
  const double val = progress.validation_loss();
  const bool has_val = val > 0 || std::isnan(val);
  const bool on_interval = eval_interval_ > 0 && progress.step() > 0 &&
                           progress.step() % eval_interval_ == 0;
  const bool evaluated =
      has_val && (!(val == previous_validation_loss_) || on_interval);
  previous_validation_loss_ = val;

  while (!points_.empty() && points_.back().step >= progress.step()) {
    points_.pop_back();
  }
  LossPoint point;
  point.step = progress.step();
  point.train_loss = progress.loss();
  if (evaluated) point.val_loss = val;
  point.tokens_per_second = progress.tokens_per_second();
  points_.push_back(point);
}

namespace {

std::string CsvNumber(double value, int significant_digits) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.*g", significant_digits, value);
}

}  // namespace

std::string RenderLossCsv(const std::vector<LossPoint>& points) {
  std::string csv = "step,train_loss,val_loss,tokens_per_s\n";
  for (const LossPoint& point : points) {
    absl::StrAppend(&csv, point.step, ",", CsvNumber(point.train_loss, 9),
                    ",",
                    point.val_loss.has_value()
                        ? CsvNumber(*point.val_loss, 9)
                        : "",
                    ",", CsvNumber(point.tokens_per_second, 9), "\n");
  }
  return csv;
}

LinePlot MakeLossPlot(const std::vector<LossPoint>& points,
                      const std::string& title) {
  PlotSeries train{"train loss", "#1f77b4", {}, false};
  PlotSeries validation{"validation loss", "#ff7f0e", {}, true};
  for (const LossPoint& point : points) {
    train.points.emplace_back(point.step, point.train_loss);
    if (point.val_loss.has_value()) {
      validation.points.emplace_back(point.step, *point.val_loss);
    }
  }
  LinePlot plot;
  plot.title = title;
  plot.x_label = "step";
  plot.y_label = "loss (nats/token)";
  plot.series = {std::move(train), std::move(validation)};
  return plot;
}

}  // namespace corescape::cli
