#include "table.h"

#include <algorithm>
#include <utility>

namespace cuflight::cli {
namespace {

constexpr std::string_view kGap = "  ";

}  // namespace

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render(int indent) const {
  std::vector<size_t> widths(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = columns_[c].header.size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  auto append_line = [&](auto&& cell_at) {
    std::string line(static_cast<size_t>(std::max(indent, 0)), ' ');
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cell_at(c);
      const std::string pad(widths[c] - cell.size(), ' ');
      if (c > 0) line += kGap;
      if (columns_[c].align == Align::kRight) {
        line += pad;
        line += cell;
      } else {
        line += cell;
        line += pad;
      }
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line;
    out += '\n';
  };
  append_line([&](size_t c) -> const std::string& { return columns_[c].header; });
  for (const auto& row : rows_) {
    append_line([&](size_t c) -> const std::string& { return row[c]; });
  }
  return out;
}

}  // namespace cuflight::cli
