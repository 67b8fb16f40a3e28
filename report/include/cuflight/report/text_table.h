// A terminal table, for the report and `cuflight occupancy`: columns padded to their widest cell
// and separated by two spaces, no trailing spaces, and colour per cell applied after padding so it
// never counts toward a width. Widths count bytes: cells are ASCII (kernel names are shortened
// before).
#ifndef CUFLIGHT_REPORT_TEXT_TABLE_H_
#define CUFLIGHT_REPORT_TEXT_TABLE_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuflight/report/kernel_names.h"

namespace cuflight::report {

// ANSI SGR sequences, or "" for none.
namespace ansi {
inline constexpr std::string_view kBold = "\x1b[1m";
inline constexpr std::string_view kDim = "\x1b[2m";
inline constexpr std::string_view kRed = "\x1b[31m";
inline constexpr std::string_view kYellow = "\x1b[33m";
inline constexpr std::string_view kGreen = "\x1b[32m";
inline constexpr std::string_view kCyan = "\x1b[36m";
inline constexpr std::string_view kReset = "\x1b[0m";
}  // namespace ansi

// `text` wrapped in `style` ... reset when `color` and style is not empty.
std::string Paint(std::string_view text, std::string_view style, bool color);

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };
  struct Cell {
    Cell() = default;
    // Implicit, so that a row of plain strings is a row of unstyled cells.
    // NOLINTNEXTLINE(google-explicit-constructor)
    Cell(std::string cell_text, std::string_view cell_style = "")
        : text(std::move(cell_text)), style(cell_style) {}
    // NOLINTNEXTLINE(google-explicit-constructor)
    Cell(const char* cell_text, std::string_view cell_style = "")
        : Cell(std::string(cell_text), cell_style) {}
    std::string text;
    std::string_view style;  // an ansi:: constant or ""
  };

  explicit TextTable(std::vector<Column> columns);

  // One cell per column; missing trailing cells are empty, extra cells are dropped.
  void AddRow(std::vector<Cell> cells);
  // A free line printed after the latest row (not part of the columns), e.g. advice.
  void AddNote(std::string text, std::string_view style = "");

  // The width the last column has when lines indented by `indent` fit `line_width` bytes, at
  // least `min_room`.
  size_t LastColumnRoom(size_t line_width, int indent, size_t min_room) const;

  // Replaces the last column's cells, all at once, by `shorten(cells, room).names` (one for
  // one): a shortener that looks at every name shown (ShortenKernelNames). Its legend (the ids it
  // gave names too long to tell apart otherwise) is printed under the rows.
  void ShortenLastColumn(
      size_t room,
      const std::function<ShortKernelNames(const std::vector<std::string>&, size_t)>& shorten);

  // The last column's cells, one per row (after ShortenLastColumn, as shortened).
  std::vector<std::string> LastColumn() const;

  // Header (bold when colour) then rows, then the name legend (dim when colour), each line
  // prefixed by `indent` spaces and ending '\n'.
  std::string Render(int indent = 0, bool color = false) const;

 private:
  struct Row {
    std::vector<Cell> cells;
    std::vector<std::pair<std::string, std::string_view>> notes;
  };
  std::vector<size_t> Widths() const;

  std::vector<Column> columns_;
  std::vector<Row> rows_;
  std::vector<KernelNameLegendEntry> legend_;
};

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_TEXT_TABLE_H_
