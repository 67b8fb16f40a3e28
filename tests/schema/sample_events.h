// Sample events shared by the schema tests.
#ifndef CUFLIGHT_TESTS_SCHEMA_SAMPLE_EVENTS_H_
#define CUFLIGHT_TESTS_SCHEMA_SAMPLE_EVENTS_H_

#include <string>
#include <vector>

#include "cuflight/schema/events.h"

namespace cuflight::schema::testing {

// Strings that stress the escaper but are valid UTF-8, so they survive a round trip unchanged:
// quotes, backslashes, every ASCII control character and DEL, multi-byte text, U+2028.
std::vector<std::string> HostileValidStrings();

// Byte strings with ill-formed UTF-8, each with the string Decode must return for it (U+FFFD per
// maximal subpart).
struct InvalidUtf8Case {
  std::string input;
  std::string decoded;
};
std::vector<InvalidUtf8Case> InvalidUtf8Cases();

// Events of every type, with every optional shape (cluster present or absent, null what-if
// fields, null exit code, empty lists, extreme integers, hostile but valid strings). Encode then
// Decode returns each unchanged.
std::vector<OwnedEvent> RoundTripEvents();

// Events whose encoding is valid but lossy: ill-formed UTF-8 in every string field, NaN,
// infinities and out-of-range fractions in every double field.
std::vector<OwnedEvent> LossyEvents();

// A realistic kernel event (a CUTLASS GEMM launch on an H100).
OwnedKernelEvent RealisticKernel();

// The encoded lines of RoundTripEvents(), LossyEvents() and RealisticKernel().
std::vector<std::string> SampleLines();

// One sample line of every type (and of the kernel with a cluster, and the kernel and the
// kernel_time of a CUDA graph node), each also with every member in turn removed, or replaced by
// each of about 50 JSON values that break or stretch it (wrong types, range edges, enum names):
// about 14,000 lines, each ending in '\n'; most are rejected, never for their syntax.
std::vector<std::string> MutatedLines();

// Encodes `event` (through the View structs, as the injector does); fails the test on 0.
std::string EncodeLine(const OwnedEvent& event);

}  // namespace cuflight::schema::testing

#endif  // CUFLIGHT_TESTS_SCHEMA_SAMPLE_EVENTS_H_
