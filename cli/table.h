// A plain-text table for terminal output: a header row, then rows; columns padded to their widest
// cell and separated by two spaces; no colour, no trailing spaces.
#ifndef CUFLIGHT_CLI_TABLE_H_
#define CUFLIGHT_CLI_TABLE_H_

#include <string>
#include <vector>

namespace cuflight::cli {

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kLeft;
  };

  explicit TextTable(std::vector<Column> columns);

  // One cell per column; missing trailing cells are empty, extra cells are dropped.
  void AddRow(std::vector<std::string> cells);

  // Every line, header first, prefixed by `indent` spaces and ending in '\n'. Widths count bytes,
  // so cells are expected to be ASCII.
  std::string Render(int indent = 0) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace cuflight::cli

#endif  // CUFLIGHT_CLI_TABLE_H_
