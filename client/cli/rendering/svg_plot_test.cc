// The SVG writer (well-formed, both series, ticks and legend, NaN and
// empty series) and the loss curve behind `corescape plot` (CSV, resumed
// jobs, evaluation detection).
#include "client/cli/rendering/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "client/cli/rendering/loss_curve.h"
#include "gtest/gtest.h"

namespace corescape::cli {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Every element closed in order, quotes balanced inside tags, one <svg>
// root: enough XML to catch a broken writer.
::testing::AssertionResult IsWellFormed(const std::string& svg) {
  std::vector<std::string> open;
  size_t roots = 0;
  size_t pos = 0;
  while ((pos = svg.find('<', pos)) != std::string::npos) {
    const size_t end = svg.find('>', pos);
    if (end == std::string::npos) {
      return ::testing::AssertionFailure() << "unterminated tag at " << pos;
    }
    const std::string tag = svg.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.empty()) return ::testing::AssertionFailure() << "empty tag";
    if (tag[0] == '?') continue;  // <?xml ...?>
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) {
      return ::testing::AssertionFailure() << "unbalanced quotes in <" << tag << ">";
    }
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return ::testing::AssertionFailure()
               << "</" << name << "> closes " << (open.empty() ? "nothing" : open.back());
      }
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    if (open.empty()) ++roots;
    if (open.empty() && name != "svg") {
      return ::testing::AssertionFailure() << "root element <" << name << ">";
    }
    if (tag.back() != '/') open.push_back(name);
  }
  if (!open.empty()) return ::testing::AssertionFailure() << "<" << open.back() << "> not closed";
  if (roots != 1) return ::testing::AssertionFailure() << roots << " root elements";
  return ::testing::AssertionSuccess();
}

size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + 1)) {
    ++count;
  }
  return count;
}

LinePlot TwoSeriesPlot() {
  LinePlot plot;
  plot.title = "loss of job j-1 (tiny & <fortunes>)";
  plot.x_label = "step";
  plot.y_label = "loss";
  plot.series.push_back({"train loss", "#1f77b4", {}, false});
  plot.series.push_back({"validation loss", "#ff7f0e", {}, true});
  for (int step = 1; step <= 300; ++step) {
    plot.series[0].points.emplace_back(step, 5.5 - 3.0 * step / 300);
  }
  for (int step = 50; step <= 300; step += 50) {
    plot.series[1].points.emplace_back(step, 5.6 - 3.0 * step / 300);
  }
  return plot;
}

TEST(SvgPlotTest, WellFormedWithBothSeriesAxesAndLegend) {
  const std::string svg = RenderLinePlotSvg(TwoSeriesPlot());
  EXPECT_TRUE(IsWellFormed(svg));
  EXPECT_TRUE(absl::StartsWith(svg, "<?xml version=\"1.0\""));
  EXPECT_TRUE(absl::StrContains(svg, "xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(absl::StrContains(svg, "data-name=\"train loss\""));
  EXPECT_TRUE(absl::StrContains(svg, "data-name=\"validation loss\""));
  EXPECT_EQ(Count(svg, "<polyline"), 2);
  // Six validation markers plus the legend's.
  EXPECT_EQ(Count(svg, "<circle"), 7);
  // Title escaped; labels and legend present.
  EXPECT_TRUE(absl::StrContains(svg, "tiny &amp; &lt;fortunes&gt;"));
  EXPECT_TRUE(absl::StrContains(svg, ">step</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">loss</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">train loss</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">validation loss</text>"));
  // Step ticks every 50, loss ticks every 1 (2.5..5.6 padded to 2..6).
  EXPECT_TRUE(absl::StrContains(svg, ">0</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">150</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">300</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">2</text>"));
  EXPECT_TRUE(absl::StrContains(svg, ">6</text>"));
  EXPECT_FALSE(absl::StrContains(svg, "nan"));
}

TEST(SvgPlotTest, NonFinitePointsBreakTheLine) {
  LinePlot plot = TwoSeriesPlot();
  plot.series[0].points[100].second = kNaN;
  plot.series[0].points[200].second = std::numeric_limits<double>::infinity();
  plot.series[1].points[2].second = kNaN;
  const std::string svg = RenderLinePlotSvg(plot);
  EXPECT_TRUE(IsWellFormed(svg));
  EXPECT_EQ(Count(svg, "<polyline"), 3 + 2);  // train in 3 runs, val in 2
  EXPECT_FALSE(absl::StrContains(svg, "nan"));
  EXPECT_FALSE(absl::StrContains(svg, "inf"));
}

TEST(SvgPlotTest, EmptyValidationSeriesIsLabelledNoData) {
  LinePlot plot = TwoSeriesPlot();
  plot.series[1].points.clear();
  const std::string svg = RenderLinePlotSvg(plot);
  EXPECT_TRUE(IsWellFormed(svg));
  EXPECT_TRUE(absl::StrContains(svg, ">validation loss (no data)</text>"));
  EXPECT_EQ(Count(svg, "<polyline"), 1);

  plot.series[1].points = {{50, kNaN}, {100, kNaN}};
  const std::string all_nan = RenderLinePlotSvg(plot);
  EXPECT_TRUE(IsWellFormed(all_nan));
  EXPECT_TRUE(absl::StrContains(all_nan, ">validation loss (no data)</text>"));
}

TEST(SvgPlotTest, NoDataAtAll) {
  LinePlot plot;
  plot.title = "empty";
  plot.series.push_back({"train loss", "blue", {}, false});
  const std::string svg = RenderLinePlotSvg(plot);
  EXPECT_TRUE(IsWellFormed(svg));
  EXPECT_TRUE(absl::StrContains(svg, ">no data</text>"));
  EXPECT_EQ(Count(svg, "<polyline"), 0);
}

TEST(SvgPlotTest, SinglePointIsVisible) {
  LinePlot plot;
  plot.series.push_back({"train loss", "blue", {{7, 3.25}}, false});
  const std::string svg = RenderLinePlotSvg(plot);
  EXPECT_TRUE(IsWellFormed(svg));
  EXPECT_EQ(Count(svg, "<circle"), 1);
  // A flat range still gets an axis: 3.1..3.4 in steps of 0.1.
  EXPECT_TRUE(absl::StrContains(svg, ">3.2</text>"));
}

TEST(SvgPlotTest, NiceTicksCoverTheRangeWithRoundSteps) {
  EXPECT_EQ(NiceTicks(0, 300, 8),
            (std::vector<double>{0, 50, 100, 150, 200, 250, 300}));
  const std::vector<double> ticks = NiceTicks(2.13, 5.61, 6);
  ASSERT_GE(ticks.size(), 4);
  EXPECT_LE(ticks.front(), 2.13);
  EXPECT_GE(ticks.back(), 5.61);
  EXPECT_NEAR(ticks.front(), 2.0, 1e-12);
  EXPECT_NEAR(ticks[1] - ticks[0], 1.0, 1e-12);
  const std::vector<double> small = NiceTicks(0.001, 0.0042, 5);
  EXPECT_NEAR(small[1] - small[0], 0.001, 1e-15);
}

TEST(SvgPlotTest, EscapesMarkup) {
  EXPECT_EQ(EscapeXml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
}

corescape::v1::JobProgress Progress(int64_t step, double loss, double val,
                                    double tokens_per_second = 1000) {
  corescape::v1::JobProgress progress;
  progress.set_step(step);
  progress.set_total_steps(10);
  progress.set_loss(loss);
  progress.set_validation_loss(val);
  progress.set_tokens_per_second(tokens_per_second);
  return progress;
}

TEST(LossCurveTest, ValidationLossOnlyWhereEvaluated) {
  // The scheduler may carry the last validation loss on every event, or
  // send it only at evaluation steps: both give the same curve.
  for (bool carried : {true, false}) {
    LossCurve curve(/*eval_interval=*/2);
    curve.Add(Progress(1, 5.0, 0));
    curve.Add(Progress(2, 4.0, 4.5));
    curve.Add(Progress(3, 3.5, carried ? 4.5 : 0));
    curve.Add(Progress(4, 3.0, 3.25));
    curve.Add(Progress(5, 2.9, carried ? 3.25 : 0));
    curve.Add(Progress(6, 2.8, 3.25));  // same value, evaluated again
    ASSERT_EQ(curve.points().size(), 6);
    EXPECT_FALSE(curve.points()[0].val_loss.has_value());
    EXPECT_EQ(curve.points()[1].val_loss, 4.5);
    EXPECT_FALSE(curve.points()[2].val_loss.has_value());
    EXPECT_EQ(curve.points()[3].val_loss, 3.25);
    EXPECT_FALSE(curve.points()[4].val_loss.has_value());
    EXPECT_EQ(curve.points()[5].val_loss, 3.25);
  }
}

TEST(LossCurveTest, ResumedJobReplacesTheStepsItRedid) {
  LossCurve curve;
  for (int step = 1; step <= 5; ++step) curve.Add(Progress(step, 10 - step, 0));
  // Recovery from the checkpoint at step 3: steps 4.. run again.
  curve.Add(Progress(4, 5.5, 0));
  ASSERT_EQ(curve.points().size(), 4);
  EXPECT_EQ(curve.points()[3].step, 4);
  EXPECT_EQ(curve.points()[3].train_loss, 5.5);
}

TEST(LossCurveTest, CsvHasHeaderEmptyValsAndNan) {
  LossCurve curve;
  curve.Add(Progress(1, 5.25, 0, 12345.5));
  curve.Add(Progress(2, kNaN, kNaN, 0));
  curve.Add(Progress(3, 4.0, 3.5, 100));
  EXPECT_EQ(RenderLossCsv(curve.points()),
            "step,train_loss,val_loss,tokens_per_s\n"
            "1,5.25,,12345.5\n"
            "2,nan,nan,0\n"
            "3,4,3.5,100\n");
  EXPECT_EQ(RenderLossCsv({}), "step,train_loss,val_loss,tokens_per_s\n");
}

TEST(LossCurveTest, PlotHasTrainAndValidationSeries) {
  LossCurve curve;
  curve.Add(Progress(1, 5.0, 0));
  curve.Add(Progress(2, 4.0, 4.5));
  const LinePlot plot = MakeLossPlot(curve.points(), "loss of job j-1");
  ASSERT_EQ(plot.series.size(), 2);
  EXPECT_EQ(plot.series[0].points.size(), 2);
  EXPECT_EQ(plot.series[1].points.size(), 1);
  EXPECT_TRUE(plot.series[1].markers);
  EXPECT_TRUE(IsWellFormed(RenderLinePlotSvg(plot)));
}

}  // namespace
}  // namespace corescape::cli
