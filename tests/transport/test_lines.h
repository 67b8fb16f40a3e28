// Deterministic test lines: a JSON-like line with a seq, a tag and a padding that depends on
// both, of an exact length, so a receiver can check every byte.
#ifndef CUFLIGHT_TESTS_TRANSPORT_TEST_LINES_H_
#define CUFLIGHT_TESTS_TRANSPORT_TEST_LINES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cuflight::transport::testing {

// Exactly `size` bytes (at least 64), ending in '\n': {"type":"t","seq":N,"tag":"...","pad":"..."}
std::string MakeLine(uint64_t seq, size_t size, std::string_view tag = "p");

}  // namespace cuflight::transport::testing

#endif  // CUFLIGHT_TESTS_TRANSPORT_TEST_LINES_H_
