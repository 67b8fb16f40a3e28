#include "test_lines.h"

#include <stdexcept>

namespace cuflight::transport::testing {

std::string MakeLine(uint64_t seq, size_t size, std::string_view tag) {
  std::string line = R"({"type":"t","seq":)" + std::to_string(seq) + R"(,"tag":")" +
                     std::string(tag) + R"(","pad":")";
  constexpr std::string_view kEnd = "\"}\n";
  if (line.size() + kEnd.size() > size) throw std::invalid_argument("line size too small");
  for (size_t i = 0; line.size() + kEnd.size() < size; ++i) {
    line.push_back(static_cast<char>('a' + (seq * 7 + i) % 26));
  }
  line.append(kEnd);
  return line;
}

}  // namespace cuflight::transport::testing
