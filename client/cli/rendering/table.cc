#include "client/cli/rendering/table.h"

#include <algorithm>
#include <utility>

#include "runtime/base/printable_text.h"

namespace corescape::cli {

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (std::string& cell : cells) cell = EscapeUnsafeCharacters(cell);
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const { return RenderLines(true); }

std::string Table::RenderRowsOnly() const { return RenderLines(false); }

std::string Table::RenderLines(bool with_header) const {
  constexpr size_t kColumnGap = 2;
  std::vector<size_t> widths(headers_.size(), 0);
  auto measure = [&widths](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      widths[i] = std::max(widths[i], cells[i].size());
    }
  };
  measure(headers_);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto render_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      line += cells[i];
      if (i + 1 < cells.size()) {
        line.append(widths[i] - cells[i].size() + kColumnGap, ' ');
      }
    }
    // Trailing empty cells would otherwise leave padding at the end.
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  if (with_header) render_line(headers_);
  for (const auto& row : rows_) render_line(row);
  return out;
}

}  // namespace corescape::cli
