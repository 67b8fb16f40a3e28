// The reference decoder: one line -> schema::DecodeResult over nlohmann/json's DOM, written apart
// from the codec (schema/src/validator.cc, which Decode and Validate share) from the same field
// tables (event_fields.h). The tests and the fuzzer (tests/fuzz/line_fuzzer.cc) hold Decode and
// Validate to it: the same Reason and header on every line, the same event on every accepted
// one. Its messages use other words than the codec's; only the Reason is compared.
#ifndef CUFLIGHT_TESTS_SUPPORT_REFERENCE_DECODER_H_
#define CUFLIGHT_TESTS_SUPPORT_REFERENCE_DECODER_H_

#include <string_view>

#include "cuflight/schema/decoder.h"

namespace cuflight::test_support {

// schema::Decode's contract (decoder.h), over nlohmann/json. Never throws.
schema::DecodeResult ReferenceDecode(std::string_view line) noexcept;

}  // namespace cuflight::test_support

#endif  // CUFLIGHT_TESTS_SUPPORT_REFERENCE_DECODER_H_
