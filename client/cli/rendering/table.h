// Plain-text tables for terminal output: left-aligned columns separated by
// two spaces, like `kubectl get` or `docker ps`.
#ifndef CORESCAPE_CLIENT_CLI_RENDERING_TABLE_H_
#define CORESCAPE_CLIENT_CLI_RENDERING_TABLE_H_

#include <string>
#include <vector>

namespace corescape::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> headers);

  // Rows shorter than the header are padded with empty cells; extra cells
  // are dropped, so a row can never break the alignment. Cells hold text
  // other users stored (names, reasons, event texts): each is escaped
  // (EscapeUnsafeCharacters), so none can colour the terminal, move the
  // cursor or start a fake row.
  void AddRow(std::vector<std::string> cells);

  size_t row_count() const { return rows_.size(); }

  // One line per row (header first), each ending in '\n'. The last column is
  // not padded, so lines carry no trailing spaces.
  std::string Render() const;

  // The same lines without the header, for key/value blocks.
  std::string RenderRowsOnly() const;

 private:
  std::string RenderLines(bool with_header) const;

  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace corescape::cli

#endif  // CORESCAPE_CLIENT_CLI_RENDERING_TABLE_H_
