// Deterministic test lines of an exact length, with a padding that depends on the seq, so a
// receiver can check every byte: JSON-like lines for the Sender alone, and valid events (schema
// v1) for tests that go through the real collector, which stores only those.
#ifndef CUFLIGHT_TESTS_TRANSPORT_TEST_LINES_H_
#define CUFLIGHT_TESTS_TRANSPORT_TEST_LINES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cuflight::transport::testing {

// Exactly `size` bytes (at least 64), ending in '\n': {"type":"t","seq":N,"tag":"...","pad":"..."}
std::string MakeLine(uint64_t seq, size_t size, std::string_view tag = "p");

// A valid process_start (seq 0) of exactly `size` bytes (at least 280) of this process (pid
// getpid() when made) named /opt/app/bin/<exe>: the first line of a connection the collector
// accepts (docs/protocol.md). Its padding is a field "pad", which readers of version 1 ignore
// (schema/v1/common.schema.json: fields not named in an event's schema are allowed).
std::string StartLine(size_t size, std::string_view exe = "trainer");

// A valid stats event of exactly `size` bytes (at least 200): {"type":"stats",...,"seq":N,...,
// "tag":"...","pad":"..."}, pid getpid() when made.
std::string EventLine(uint64_t seq, size_t size, std::string_view tag = "p");

}  // namespace cuflight::transport::testing

#endif  // CUFLIGHT_TESTS_TRANSPORT_TEST_LINES_H_
