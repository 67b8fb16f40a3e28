// The two paths of schema::Validate (validator.cc), each on its own, for the tests and for
// LineDecoder: Validate is ValidateFastPath, and ValidateGeneralPath when the fast path does not
// accept the line; the Decode forms write the event as they check it. Private to schema/src and
// its tests; the collector calls Validate.
#ifndef CUFLIGHT_SCHEMA_SRC_VALIDATOR_INTERNAL_H_
#define CUFLIGHT_SCHEMA_SRC_VALIDATOR_INTERNAL_H_

#include <string_view>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/validator.h"

namespace cuflight::schema::internal {

// The expected-order fast path (validator_fast_path.h). True when it accepts `line`: then the
// general path accepts it too, and *info holds exactly what the general path would write. False
// when it does not decide (any line not in the encoder's layout): *info is then unspecified.
// `info` must not be null. Never allocates, never throws.
bool ValidateFastPath(std::string_view line, LineInfo* info) noexcept;

// The fast path for a kernel (kernel_time) line in the encoder's layout that also writes the
// line's members into *e (LineDecoder): true when it accepts the line, as ValidateFastPath, and
// then *e is what Decode gives. *e must be reset to its defaults
// (its strings' buffers may be kept). False decides nothing. May throw std::bad_alloc.
bool DecodeFastPath(std::string_view line, LineInfo* info, OwnedKernelEvent* e);
bool DecodeFastPath(std::string_view line, LineInfo* info, OwnedKernelTimeEvent* e);
bool DecodeFastPath(std::string_view line, LineInfo* info, OwnedLaunchEvent* e);

// The general path alone: Validate's contract (validator.h) without the fast path.
Reason ValidateGeneralPath(std::string_view line, LineInfo* info, ValidateError* error) noexcept;

// The general path, also filling *event as Decode does when the line is accepted (LineDecoder).
// `info`, `error` and `event` must not be null. May throw std::bad_alloc.
Reason DecodeGeneralPath(std::string_view line, LineInfo* info, ValidateError* error,
                         OwnedEvent* event);

}  // namespace cuflight::schema::internal

#endif  // CUFLIGHT_SCHEMA_SRC_VALIDATOR_INTERNAL_H_
