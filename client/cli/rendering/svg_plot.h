// A small SVG line-plot writer (no plotting package): axes with "nice"
// ticks and labels, grid lines, one polyline per series (broken at
// non-finite points), optional point markers, a title and a legend.
#ifndef CORESCAPE_CLIENT_CLI_RENDERING_SVG_PLOT_H_
#define CORESCAPE_CLIENT_CLI_RENDERING_SVG_PLOT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace corescape::cli {

struct PlotSeries {
  std::string name;     // legend text
  std::string color;    // any SVG color, e.g. "#1f77b4"
  std::vector<std::pair<double, double>> points;  // (x, y); NaN/inf skipped
  bool markers = false;  // a small circle at every point
};

struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<PlotSeries> series;
  int width = 800;
  int height = 480;
};

// A complete standalone SVG document. Series without any finite point
// still get a legend entry, marked "(no data)"; with no finite point at all
// the axes span [0, 1] and the plot says "no data".
std::string RenderLinePlotSvg(const LinePlot& plot);

// About `target_count` round tick values (1, 2 or 5 times a power of ten
// apart) covering [low, high]; low < high.
std::vector<double> NiceTicks(double low, double high, int target_count);

// &, <, >, " and ' as entities.
std::string EscapeXml(absl::string_view text);

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_RENDERING_SVG_PLOT_H_
