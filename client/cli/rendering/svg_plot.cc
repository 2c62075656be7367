#include "client/cli/rendering/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace corescape::cli {

namespace {

// 1, 2 or 5 times a power of ten, at least `raw`.
double NiceStep(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (factor * magnitude >= raw * (1 - 1e-9)) return factor * magnitude;
  }
  return 10 * magnitude;
}

struct Axis {
  double low = 0;
  double high = 1;
  double step = 0.2;
  std::vector<double> ticks;
};

Axis MakeAxis(double low, double high, int target_count) {
  Axis axis;
  axis.step = NiceStep((high - low) / std::max(1, target_count - 1));
  axis.low = std::floor(low / axis.step + 1e-9) * axis.step;
  axis.high = std::ceil(high / axis.step - 1e-9) * axis.step;
  if (axis.high <= axis.low) axis.high = axis.low + axis.step;
  const int count =
      static_cast<int>(std::llround((axis.high - axis.low) / axis.step));
  for (int i = 0; i <= count; ++i) {
    double tick = axis.low + i * axis.step;
    if (std::fabs(tick) < axis.step * 1e-9) tick = 0;  // no "-0.0"
    axis.ticks.push_back(tick);
  }
  return axis;
}

std::string TickLabel(double value, double step) {
  const int decimals =
      std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  return absl::StrFormat("%.*f", decimals, value);
}

std::string Px(double value) { return absl::StrFormat("%.2f", value); }

// A non-degenerate [low, high] around the finite values.
std::pair<double, double> DataRange(const std::vector<double>& values,
                                    double padding_fraction) {
  if (values.empty()) return {0, 1};
  auto [min_it, max_it] = std::minmax_element(values.begin(), values.end());
  double low = *min_it;
  double high = *max_it;
  if (high == low) {
    const double half = low == 0 ? 0.5 : std::fabs(low) * 0.05;
    return {low - half, high + half};
  }
  const double pad = (high - low) * padding_fraction;
  return {low - pad, high + pad};
}

}  // namespace

std::vector<double> NiceTicks(double low, double high, int target_count) {
  return MakeAxis(low, high, target_count).ticks;
}

std::string EscapeXml(absl::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string RenderLinePlotSvg(const LinePlot& plot) {
  constexpr double kLeft = 72, kRight = 24, kTop = 44, kBottom = 56;
  const double width = std::max(plot.width, 200);
  const double height = std::max(plot.height, 150);
  const double x0 = kLeft, x1 = width - kRight;
  const double y0 = kTop, y1 = height - kBottom;

  std::vector<double> xs, ys;
  for (const PlotSeries& series : plot.series) {
    for (const auto& [x, y] : series.points) {
      if (std::isfinite(x) && std::isfinite(y)) {
        xs.push_back(x);
        ys.push_back(y);
      }
    }
  }
  const bool has_data = !xs.empty();
  auto [x_low, x_high] = DataRange(xs, 0);
  auto [y_low, y_high] = DataRange(ys, 0.05);
  const Axis x_axis = MakeAxis(x_low, x_high, 8);
  const Axis y_axis = MakeAxis(y_low, y_high, 6);
  auto px = [&](double x) {
    return x0 + (x - x_axis.low) / (x_axis.high - x_axis.low) * (x1 - x0);
  };
  auto py = [&](double y) {
    return y1 - (y - y_axis.low) / (y_axis.high - y_axis.low) * (y1 - y0);
  };

  std::string svg = absl::StrCat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", width,
      "\" height=\"", height, "\" viewBox=\"0 0 ", width, " ", height,
      "\" font-family=\"sans-serif\" font-size=\"12\">\n",
      "<rect x=\"0\" y=\"0\" width=\"", width, "\" height=\"", height,
      "\" fill=\"white\"/>\n");
  absl::StrAppend(&svg, "<text class=\"title\" x=\"", Px(width / 2),
                  "\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">",
                  EscapeXml(plot.title), "</text>\n");

  // Grid, ticks and tick labels.
  absl::StrAppend(&svg, "<g class=\"grid\" stroke=\"#e0e0e0\" stroke-width=\"1\">\n");
  for (double tick : x_axis.ticks) {
    absl::StrAppend(&svg, "<line x1=\"", Px(px(tick)), "\" y1=\"", Px(y0),
                    "\" x2=\"", Px(px(tick)), "\" y2=\"", Px(y1), "\"/>\n");
  }
  for (double tick : y_axis.ticks) {
    absl::StrAppend(&svg, "<line x1=\"", Px(x0), "\" y1=\"", Px(py(tick)),
                    "\" x2=\"", Px(x1), "\" y2=\"", Px(py(tick)), "\"/>\n");
  }
  absl::StrAppend(&svg, "</g>\n");
  absl::StrAppend(&svg, "<g class=\"axes\" stroke=\"black\" stroke-width=\"1\">\n",
                  "<line x1=\"", Px(x0), "\" y1=\"", Px(y1), "\" x2=\"", Px(x1),
                  "\" y2=\"", Px(y1), "\"/>\n", "<line x1=\"", Px(x0),
                  "\" y1=\"", Px(y0), "\" x2=\"", Px(x0), "\" y2=\"", Px(y1),
                  "\"/>\n");
  for (double tick : x_axis.ticks) {
    absl::StrAppend(&svg, "<line x1=\"", Px(px(tick)), "\" y1=\"", Px(y1),
                    "\" x2=\"", Px(px(tick)), "\" y2=\"", Px(y1 + 5), "\"/>\n");
  }
  for (double tick : y_axis.ticks) {
    absl::StrAppend(&svg, "<line x1=\"", Px(x0 - 5), "\" y1=\"", Px(py(tick)),
                    "\" x2=\"", Px(x0), "\" y2=\"", Px(py(tick)), "\"/>\n");
  }
  absl::StrAppend(&svg, "</g>\n<g class=\"tick-labels\" fill=\"black\">\n");
  for (double tick : x_axis.ticks) {
    absl::StrAppend(&svg, "<text x=\"", Px(px(tick)), "\" y=\"", Px(y1 + 19),
                    "\" text-anchor=\"middle\">",
                    TickLabel(tick, x_axis.step), "</text>\n");
  }
  for (double tick : y_axis.ticks) {
    absl::StrAppend(&svg, "<text x=\"", Px(x0 - 8), "\" y=\"",
                    Px(py(tick) + 4), "\" text-anchor=\"end\">",
                    TickLabel(tick, y_axis.step), "</text>\n");
  }
  absl::StrAppend(&svg, "</g>\n");
  absl::StrAppend(&svg, "<text class=\"x-label\" x=\"", Px((x0 + x1) / 2),
                  "\" y=\"", Px(height - 14), "\" text-anchor=\"middle\">",
                  EscapeXml(plot.x_label), "</text>\n");
  absl::StrAppend(&svg, "<text class=\"y-label\" x=\"18\" y=\"",
                  Px((y0 + y1) / 2), "\" text-anchor=\"middle\" transform=\"rotate(-90 18 ",
                  Px((y0 + y1) / 2), ")\">", EscapeXml(plot.y_label),
                  "</text>\n");

  // The series: one polyline per run of finite points.
  for (const PlotSeries& series : plot.series) {
    absl::StrAppend(&svg, "<g class=\"series\" data-name=\"",
                    EscapeXml(series.name), "\" stroke=\"",
                    EscapeXml(series.color), "\" fill=\"",
                    EscapeXml(series.color), "\">\n");
    std::vector<std::pair<double, double>> run;
    auto flush_run = [&]() {
      if (run.size() >= 2) {
        absl::StrAppend(&svg, "<polyline fill=\"none\" stroke-width=\"2\" points=\"");
        for (size_t i = 0; i < run.size(); ++i) {
          absl::StrAppend(&svg, i == 0 ? "" : " ", Px(px(run[i].first)), ",",
                          Px(py(run[i].second)));
        }
        absl::StrAppend(&svg, "\"/>\n");
      }
      if (series.markers || run.size() == 1) {
        for (const auto& [x, y] : run) {
          absl::StrAppend(&svg, "<circle cx=\"", Px(px(x)), "\" cy=\"", Px(py(y)),
                          "\" r=\"3\" stroke=\"none\"/>\n");
        }
      }
      run.clear();
    };
    for (const auto& [x, y] : series.points) {
      if (std::isfinite(x) && std::isfinite(y)) {
        run.emplace_back(x, y);
      } else {
        flush_run();
      }
    }
    flush_run();
    absl::StrAppend(&svg, "</g>\n");
  }
  if (!has_data) {
    absl::StrAppend(&svg, "<text class=\"no-data\" x=\"", Px((x0 + x1) / 2),
                    "\" y=\"", Px((y0 + y1) / 2),
                    "\" text-anchor=\"middle\" fill=\"#808080\">no data</text>\n");
  }

  // Legend, top right inside the plot area.
  if (!plot.series.empty()) {
    std::vector<std::string> labels;
    size_t longest = 0;
    for (const PlotSeries& series : plot.series) {
      bool any = false;
      for (const auto& [x, y] : series.points) {
        any = any || (std::isfinite(x) && std::isfinite(y));
      }
      labels.push_back(any ? series.name : series.name + " (no data)");
      longest = std::max(longest, labels.back().size());
    }
    const double box_width = 40 + 7.0 * longest;
    const double box_height = 8 + 18.0 * labels.size();
    const double bx = x1 - box_width - 8, by = y0 + 8;
    absl::StrAppend(&svg, "<g class=\"legend\">\n<rect x=\"", Px(bx),
                    "\" y=\"", Px(by), "\" width=\"", Px(box_width),
                    "\" height=\"", Px(box_height),
                    "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#a0a0a0\"/>\n");
    for (size_t i = 0; i < labels.size(); ++i) {
      const double ly = by + 16 + 18.0 * i;
      const std::string color = EscapeXml(plot.series[i].color);
      absl::StrAppend(&svg, "<line x1=\"", Px(bx + 8), "\" y1=\"", Px(ly - 4),
                      "\" x2=\"", Px(bx + 28), "\" y2=\"", Px(ly - 4),
                      "\" stroke=\"", color, "\" stroke-width=\"2\"/>\n");
      if (plot.series[i].markers) {
        absl::StrAppend(&svg, "<circle cx=\"", Px(bx + 18), "\" cy=\"",
                        Px(ly - 4), "\" r=\"3\" fill=\"", color, "\"/>\n");
      }
      absl::StrAppend(&svg, "<text x=\"", Px(bx + 34), "\" y=\"", Px(ly),
                      "\">", EscapeXml(labels[i]), "</text>\n");
    }
    absl::StrAppend(&svg, "</g>\n");
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace corescape::cli
