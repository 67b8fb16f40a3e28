// Allocation-free line validator for the collector's ingest path.
//
// 1. Validate gives the verdict Decode gives, without building an event: the same lines are
//    accepted, and a rejected line gets the same Reason, multi-fault lines included (it checks the
//    fields in the tables' order after one pass over the bytes). Decode is its general path
//    filling the event as it checks; the tests and the fuzzer (tests/fuzz/) hold both to a
//    reference decoder written apart over nlohmann/json (tests/support/reference_decoder.h).
// 2. One pass over the bytes checks the JSON syntax (RFC 8259 as nlohmann/json reads it: UTF-8,
//    \u escapes with paired surrogates, no NUL byte, nesting up to kMaxNestingDepth, numbers
//    within the range of a double, an optional UTF-8 byte order mark at the very start) and
//    records the top-level members. Known member names go through a fixed hash table into one
//    slot per name (a repeated name: the last one counts, as in Decode). The type-specific rules
//    then run over the slots.
// 3. No allocation, no exception, no state: any thread may call it, with its own LineInfo.
#ifndef CUFLIGHT_SCHEMA_VALIDATOR_H_
#define CUFLIGHT_SCHEMA_VALIDATOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/event_fields.h"
#include "cuflight/schema/events.h"

namespace cuflight::schema {

// One top-level member of a line, as text inside the line.
struct Member {
  // The name between its quotes, as written: unescaped only when it had no backslash escape
  // (key_escaped false, the common case). An escaped name ("ty\u0070e") is kept as the raw escaped
  // text; LineInfo::Find compares names after unescaping, so it still finds it.
  std::string_view key;
  std::string_view raw;  // the value's JSON text, e.g. `123`, `"cuLaunchKernel"`, `[1,2,3]`
  bool key_escaped = false;
};

// What Validate learned about a line. Its views point into the line, which must outlive their
// use. Reuse one per thread: Validate overwrites it and does not clear the member array (only
// member_count entries are meaningful).
struct LineInfo {
  // Lines have up to about 50 members; members past this many are not stored (member_count stays
  // at kMaxMembers, members_truncated is set) but are still validated, and Find still finds them.
  static constexpr int kMaxMembers = 64;

  std::string_view line;  // the line validated
  // The event type; meaningful when type_known.
  EventType type = EventType::kProcessStart;
  bool type_known = false;
  // The common fields; meaningful when header_valid, which is true exactly when Decode sets
  // DecodeResult::header (the result is kOk, kUnknownType, or a fault in a type-specific field).
  Header header;
  bool header_valid = false;
  // The top-level members in line order, repeated names included. Filled whenever the line is
  // one JSON object (every Reason but kMalformedJson and kNotAnObject); member_count is 0 then.
  std::array<Member, kMaxMembers> members;
  int member_count = 0;
  bool members_truncated = false;

  // The members the collector acts on (Fact, CUFLIGHT_SCHEMA_FACTS in event_fields.h), recorded
  // by the same pass; meaningful when Validate returned kOk. Bit f of fact_present: the line has
  // the top-level member; fact_member[f]: its index in `members` (the last of that name), -1 when
  // past kMaxMembers; fact_value[f]: its value when the schema makes it an integer (two's
  // complement when negative; unspecified for the others); bit f of fact_escaped: a string with
  // an escape.
  uint32_t fact_present = 0;
  uint32_t fact_escaped = 0;
  std::array<int8_t, kFactCount> fact_member;
  std::array<uint64_t, kFactCount> fact_value;

  bool Has(Fact f) const { return (fact_present >> static_cast<int>(f)) & 1; }
  // The integer value of fact f; 0 when absent.
  uint64_t Uint(Fact f) const { return Has(f) ? fact_value[static_cast<size_t>(f)] : 0; }
  // The raw JSON text of fact f, or empty when absent.
  std::string_view Raw(Fact f) const;
  // The string value of fact f: a view into the line when it has no escape, else unescaped into
  // scratch[0, cap) (the raw text's size is always enough). False when absent, not a string, or
  // when it does not fit.
  bool Text(Fact f, char* scratch, size_t cap, std::string_view* out) const;

  // Raw JSON text of the top-level member `key` (the last one when the name repeats), or nullopt.
  // Meaningful when member_count > 0.
  std::optional<std::string_view> Find(std::string_view key) const;

  // Typed reads of a top-level member. Each returns false, leaving *out alone, when the member is
  // absent or does not hold such a value. Integers follow Decode's rules: a number with a zero
  // fraction (2.0, 1e3) is an integer.
  bool GetUint(std::string_view key, uint64_t* out) const;  // 0..2^64-1
  bool GetInt(std::string_view key, int64_t* out) const;    // -2^63..2^63-1
  bool GetDouble(std::string_view key, double* out) const;  // any number
  bool GetBool(std::string_view key, bool* out) const;
  bool IsNull(std::string_view key) const;  // present and JSON null
  // A string member, unescaped. *out points into the line when the string has no escape, else into
  // scratch[0, cap). False also when the unescaped string needs more than cap bytes.
  bool GetString(std::string_view key, char* scratch, size_t cap, std::string_view* out) const;
};

// Why Validate rejected a line, in fixed storage (no allocation).
struct ValidateError {
  static constexpr size_t kCapacity = 192;

  // JSON name of the field at fault (static storage); empty for kMalformedJson, kNotAnObject and
  // kUnknownType.
  std::string_view field;
  // kMalformedJson: byte offset in the line where the syntax check stopped.
  size_t offset = 0;
  // One ASCII line in the style of DecodeResult::message (which words it uses may differ), e.g.
  // `kernel: field "grid" must be an array of 3 unsigned integers, got [1,2]`; cut to kCapacity-1.
  std::array<char, kCapacity> text{};
  size_t size = 0;

  std::string_view message() const { return {text.data(), size}; }
};

// Validates one line (leading and trailing JSON whitespace allowed, as for Decode). Returns
// Reason::kOk or the Reason Decode(line) returns. `info` (may be null) receives the type, the
// header and the members as described on LineInfo; `error` (may be null) is set when the result
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
