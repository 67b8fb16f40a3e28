// Allocation-free line validator for the collector's ingest path.
//
// 1. Validate gives the verdict Decode gives, without building an event: the same lines are
//    accepted, and a rejected line gets the same Reason, multi-fault lines included (it checks the
//    fields in the tables' order after one pass over the bytes). Decode is its general path
//    filling the event as it checks; the tests and the fuzzer (tests/fuzz/) hold both to a
//    reference decoder written apart over nlohmann/json (tests/support/reference_decoder.h).
// 2. One pass over the bytes checks the JSON syntax (RFC 8259 as nlohmann/json reads it: UTF-8,
//    \u escapes with paired surrogates, no NUL byte, nesting up to kMaxNestingDepth, numbers
//    within the range of a double, an optional UTF-8 byte order mark at the very start). Known
//    member names go through a fixed hash table into one slot per name (a repeated name: the last
//    one counts, as in Decode). The type-specific rules then run over the slots.
// 3. No allocation, no exception, no state: any thread may call it, with its own LineInfo.
#ifndef CUFLIGHT_SCHEMA_VALIDATOR_H_
#define CUFLIGHT_SCHEMA_VALIDATOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/event_fields.h"
#include "cuflight/schema/events.h"

namespace cuflight::schema {

// What Validate learned about a line. Its views point into the line, which must outlive their
// use. Reuse one per thread: Validate overwrites it.
struct LineInfo {
  std::string_view line;  // the line validated
  // The event type; meaningful when type_known.
  EventType type = EventType::kProcessStart;
  bool type_known = false;
  // The `type` member's string as written between its quotes, when it is a string without a
  // backslash escape (the last one when the name repeats); else empty. Meaningful when the line
  // is one JSON object (every Reason but kMalformedJson and kNotAnObject), for kUnknownType.
  std::string_view type_text;
  // The common fields; meaningful when header_valid, which is true exactly when Decode sets
  // DecodeResult::header (the result is kOk, kUnknownType, or a fault in a type-specific field).
  Header header;
  bool header_valid = false;

  // The members the collector acts on (Fact, CUFLIGHT_SCHEMA_FACTS in event_fields.h), recorded
  // by the same pass; meaningful when Validate returned kOk. Bit f of fact_present: the line has
  // the top-level member (the last of that name counts); fact_raw[f]: its JSON text;
  // fact_value[f]: its value when the schema makes it an integer (two's complement when
  // negative; unspecified for the others); bit f of fact_escaped: a string with an escape.
  uint32_t fact_present = 0;
  uint32_t fact_escaped = 0;
  std::array<std::string_view, kFactCount> fact_raw;
  std::array<uint64_t, kFactCount> fact_value;

  bool Has(Fact f) const { return (fact_present >> static_cast<int>(f)) & 1; }
  // The integer value of fact f; 0 when absent.
  uint64_t Uint(Fact f) const { return Has(f) ? fact_value[static_cast<size_t>(f)] : 0; }
  // The raw JSON text of fact f, or empty when absent.
  std::string_view Raw(Fact f) const { return Has(f) ? fact_raw[static_cast<size_t>(f)] : ""; }
  // The string value of fact f: a view into the line when it has no escape, else unescaped into
  // scratch[0, cap) (the raw text's size is always enough). False when absent, not a string, or
  // when it does not fit.
  bool Text(Fact f, char* scratch, size_t cap, std::string_view* out) const;
};

// Why Validate rejected a line, in fixed storage (no allocation).
struct ValidateError {
  static constexpr size_t kCapacity = 192;

  // One ASCII line in the style of DecodeResult::message (which words it uses may differ), e.g.
  // `kernel: field "grid" must be an array of 3 unsigned integers, got [1,2]`; cut to kCapacity-1.
  std::array<char, kCapacity> text{};
  size_t size = 0;

  std::string_view message() const { return {text.data(), size}; }
};

// Validates one line (leading and trailing JSON whitespace allowed, as for Decode). Returns
// Reason::kOk or the Reason Decode(line) returns. `info` (may be null) receives the type, the
// header and the facts as described on LineInfo; `error` (may be null) is set when the result
// is not kOk and left alone otherwise. Never allocates, never throws; thread-safe.
Reason Validate(std::string_view line, LineInfo* info, ValidateError* error) noexcept;

// The bit of `type` in Validate's `decode` set.
constexpr uint32_t TypeBit(EventType type) { return uint32_t{1} << static_cast<int>(type); }

// Validate, and for an accepted line whose type is in `decode` (TypeBit), its event in *event as
// Decode gives it, from the same check: for the few events a caller reads whole (the collector's
// stall event). Only such a line allocates; out of memory: kInternalError. `info` and `event`
// must not be null for the event to be filled.
Reason Validate(std::string_view line, LineInfo* info, ValidateError* error, uint32_t decode,
                OwnedEvent* event) noexcept;

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_VALIDATOR_H_
