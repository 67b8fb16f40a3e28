#include "cuflight/report/text_table.h"

#include <algorithm>
#include <utility>

#include "cuflight/report/text_format.h"

namespace cuflight::report {

std::string Paint(std::string_view text, std::string_view style, bool color) {
  if (!color || style.empty() || text.empty()) return std::string(text);
  std::string out(style);
  out += text;
  out += ansi::kReset;
  return out;
}

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::AddRow(std::vector<Cell> cells) {
  cells.resize(columns_.size());
  rows_.push_back(Row{std::move(cells), {}});
}

void TextTable::AddNote(std::string text, std::string_view style) {
  if (rows_.empty()) return;
  rows_.back().notes.emplace_back(std::move(text), style);
}

std::vector<size_t> TextTable::Widths() const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = columns_[c].header.size();
    for (const Row& row : rows_) widths[c] = std::max(widths[c], row.cells[c].text.size());
  }
  return widths;
}

size_t TextTable::LastColumnRoom(size_t line_width, int indent, size_t min_room) const {
  if (columns_.empty()) return min_room;
  const std::vector<size_t> widths = Widths();
  size_t used = static_cast<size_t>(std::max(indent, 0));
  for (size_t c = 0; c + 1 < widths.size(); ++c) used += widths[c] + 2;
  return std::max(min_room, line_width > used ? line_width - used : 0);
}

void TextTable::ShortenLastColumn(
    size_t room,
    const std::function<ShortKernelNames(const std::vector<std::string>&, size_t)>& shorten) {
  if (columns_.empty() || rows_.empty()) return;
  std::vector<std::string> cells;
  for (const Row& row : rows_) cells.push_back(row.cells.back().text);
  ShortKernelNames shortened = shorten(cells, room);
  for (size_t i = 0; i < rows_.size() && i < shortened.names.size(); ++i) {
    rows_[i].cells.back().text = std::move(shortened.names[i]);
  }
  legend_ = std::move(shortened.legend);
}

std::vector<std::string> TextTable::LastColumn() const {
  std::vector<std::string> out;
  if (columns_.empty()) return out;
  for (const Row& row : rows_) out.push_back(row.cells.back().text);
  return out;
}

std::string TextTable::Render(int indent, bool color) const {
  const std::vector<size_t> widths = Widths();
  const std::string lead(static_cast<size_t>(std::max(indent, 0)), ' ');
  std::string out;
  auto line = [&](auto&& cell_at, bool header) {
    // Trailing empty cells (and the padding before them) are dropped.
    size_t last = columns_.size();
    while (last > 0 && cell_at(last - 1).text.empty()) --last;
    std::string text = lead;
    for (size_t c = 0; c < last; ++c) {
      const Cell& cell = cell_at(c);
      const std::string pad(widths[c] - cell.text.size(), ' ');
      if (c > 0) text += "  ";
      const std::string painted = Paint(cell.text, header ? ansi::kBold : cell.style, color);
      const bool is_last = c + 1 == last;
      if (columns_[c].align == Align::kRight) {
        text += pad;
        text += painted;
      } else {
        text += painted;
        if (!is_last) text += pad;
      }
    }
    out += text;
    out += '\n';
  };
  std::vector<Cell> header_cells;
  for (const Column& c : columns_) header_cells.push_back({c.header, ""});
  line([&](size_t c) -> const Cell& { return header_cells[c]; }, true);
  for (const Row& row : rows_) {
    line([&](size_t c) -> const Cell& { return row.cells[c]; }, false);
    for (const auto& [note, style] : row.notes) {
      out += lead;
      out += Paint(note, style, color);
      out += '\n';
    }
  }
  // Legend entries wrap at the table's width (80 at least), continuation lines indented.
  size_t table_width = 0;
  for (const size_t w : widths) table_width += w + 2;
  const size_t wrap = std::max<size_t>(table_width, 80);
  for (const KernelNameLegendEntry& entry : legend_) {
    for (const std::string& wrapped : WrapWords(entry.name, wrap, entry.id + "  ", "    ")) {
      out += lead;
      out += Paint(wrapped, ansi::kDim, color);
      out += '\n';
    }
  }
  return out;
}

}  // namespace cuflight::report
