// Decoder: one line of JSON -> a typed, owned event, or the reason it is rejected. It enforces
// what the JSON Schema in schema/v1/ enforces for the known event types: required fields, their
// JSON types and their ranges. Fields it does not know are ignored (later minor versions may add
// some). It is the validator's general path (validator.h) filling the event in its one pass; it
// allocates, and is meant for the collector and report tools, not for the injected library.
#ifndef CUFLIGHT_SCHEMA_DECODER_H_
#define CUFLIGHT_SCHEMA_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "cuflight/schema/events.h"

namespace cuflight::schema {

// Why a line was rejected. Decode checks, in this order: one JSON value; an object; `type` a
// string and `version` an integer; the version; the other common fields; the type known; the
// type-specific fields in the order of the schema. A line with several faults gets the first.
enum class Reason : uint8_t {
  kOk = 0,
  kMalformedJson,       // not exactly one JSON value (syntax error, invalid UTF-8, empty)
  kNotAnObject,         // a JSON value other than an object
  kUnknownType,         // the common fields are valid but `type` names no event known here
  kUnsupportedVersion,  // `version` is an integer other than kSchemaVersion
  kMissingField,        // a required field is absent
  kWrongType,           // a field has the wrong JSON type (or an array the wrong shape)
  kOutOfRange,          // a field has the right type but a value outside its range or enum
  kInternalError,       // out of memory while decoding
};
inline constexpr int kReasonCount = 9;

// Stable snake_case name of `reason` for metrics and logs: "ok", "malformed_json",
// "not_an_object", "unknown_type", "unsupported_version", "missing_field", "wrong_type",
// "out_of_range", "internal_error"; "unknown" for a value outside the enum.
constexpr std::string_view ReasonName(Reason reason) {
  constexpr std::string_view kNames[kReasonCount] = {
      "ok",           "malformed_json",      "not_an_object",
      "unknown_type", "unsupported_version", "missing_field",
      "wrong_type",   "out_of_range",        "internal_error"};
  const auto i = static_cast<size_t>(reason);
  return i < std::size(kNames) ? kNames[i] : "unknown";
}

struct DecodeResult {
  Reason reason = Reason::kOk;
  // Empty when ok; otherwise one line (ASCII-safe quoting of values) that names the event type and
  // the field, e.g. `kernel: field "grid" must be an array of 3 unsigned integers, got [1,2]`.
  std::string message;
  // The common fields, set once they have been validated: always when ok, and for kUnknownType
  // and errors in type-specific fields (so a collector can still account for the seq number).
  std::optional<Header> header;
  // The decoded event; meaningful only when ok.
  OwnedEvent event;

  bool ok() const { return reason == Reason::kOk; }
};

// Arrays and objects may nest this deep (the event object itself is depth 1); a deeper line is
// kMalformedJson, for Decode and Validate alike.
inline constexpr int kMaxNestingDepth = 64;

// Decodes one line. Leading and trailing JSON whitespace (a final "\n" or "\r\n") is allowed, and
// so is a UTF-8 byte order mark as the very first bytes; anything else after the object is
// kMalformedJson, as are a NUL byte anywhere, nesting beyond kMaxNestingDepth, and a number that
// rounds to infinity as a double. Duplicate keys: the last one counts (everywhere,
// nested objects included). Never throws; thread-safe.
DecodeResult Decode(std::string_view line) noexcept;

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_DECODER_H_
