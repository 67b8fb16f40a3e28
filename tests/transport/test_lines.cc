#include "test_lines.h"

#include <unistd.h>

#include <stdexcept>

namespace cuflight::transport::testing {

namespace {

// `line` (ending in `"pad":"`) padded to `size` bytes and closed.
std::string Padded(std::string line, uint64_t seq, size_t size) {
  constexpr std::string_view kEnd = "\"}\n";
  if (line.size() + kEnd.size() > size) throw std::invalid_argument("line size too small");
  for (size_t i = 0; line.size() + kEnd.size() < size; ++i) {
    line.push_back(static_cast<char>('a' + (seq * 7 + i) % 26));
  }
  line.append(kEnd);
  return line;
}

std::string Header(std::string_view type, uint64_t seq) {
  return R"({"type":")" + std::string(type) + R"(","version":1,"ts_ns":)" +
         std::to_string(1732000000000000000 + seq) + R"(,"pid":)" + std::to_string(getpid()) +
         R"(,"seq":)" + std::to_string(seq);
}

}  // namespace

std::string MakeLine(uint64_t seq, size_t size, std::string_view tag) {
  return Padded(R"({"type":"t","seq":)" + std::to_string(seq) + R"(,"tag":")" + std::string(tag) +
                    R"(","pad":")",
                seq, size);
}

std::string StartLine(size_t size, std::string_view exe) {
  return Padded(Header("process_start", 0) + R"(,"exe":"/opt/app/bin/)" + std::string(exe) +
                    R"(","argv":[")" + std::string(exe) +
                    R"("],"hostname":"testhost","start_ns":1732000000000000000,)"
                    R"("cuflight_version":"0.1.0","cuda_driver_version":12040,"cupti_version":22,)"
                    R"("pad":")",
                0, size);
}

std::string EventLine(uint64_t seq, size_t size, std::string_view tag) {
  return Padded(Header("stats", seq) +
                    R"(,"emitted":0,"dropped":0,"ring_capacity":1,"interval_ns":1,"tag":")" +
                    std::string(tag) + R"(","pad":")",
                seq, size);
}

}  // namespace cuflight::transport::testing
