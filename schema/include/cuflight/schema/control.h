// Taking turns with other CUPTI tools: the control messages of the wire (docs/protocol.md,
// "Yielding CUPTI").
//
// 1. Collector -> producer, on the producer's own connection, between acks: one line
//    `{"type":"yield","for_ms":N}\n`. N > 0: stop recording, hand CUPTI back (cuptiUnsubscribe)
//    and stay off at least N ms before trying to subscribe again; N == 0: end a yield now (try to
//    subscribe again at once). N is at most kMaxYieldMs. The producer reads it like an ack, from a
//    fixed buffer, without a JSON library: only the exact form EncodeYield writes is taken.
// 2. `cuflight yield` -> collector, on a connection of its own to the collector's Unix socket:
//    one line, a JSON object, instead of a process_start: kYieldRequestType, `version` 1, either
//    `pid` (a pid in the pid namespace `pid_ns` names, the inode of /proc/<pid>/ns/pid) or `job`
//    (process_start's attribution.job), and `for_ms`; the line begins with kYieldRequestOpening
//    (its type first). The collector answers with one line of
//    kYieldReplyType (`matched`, `asked`, `refused`, `processes`) and closes. Both sides parse
//    these with their JSON library (the collector and the CLI link one); only the names live here.
// 3. Who may ask: the collector forwards a request only to producers whose SO_PEERCRED uid is the
//    requester's own, or when the requester is root; never to a TCP producer (no verified uid)
//    unless the requester is root, and it takes requests on its Unix socket only.
#ifndef CUFLIGHT_SCHEMA_CONTROL_H_
#define CUFLIGHT_SCHEMA_CONTROL_H_

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "cuflight/schema/ack.h"

namespace cuflight::schema {

// The longest yield a request may ask for: a day.
inline constexpr uint64_t kMaxYieldMs = 86'400'000;
// Longest yield line: the fixed text, up to 20 digits, the newline.
inline constexpr size_t kMaxYieldLineBytes = 56;

inline constexpr std::string_view kYieldRequestType = "yield_request";
inline constexpr std::string_view kYieldReplyType = "yield_reply";
// A request line begins with exactly this (its type first, no blank), which no event line does.
inline constexpr std::string_view kYieldRequestOpening = R"({"type":"yield_request",)";

inline constexpr std::string_view kYieldPrefix = R"({"type":"yield","for_ms":)";

// Writes the yield line for `for_ms` (with its '\n') into buf; returns its length, or 0 if cap is
// too small or for_ms is above kMaxYieldMs. Allocation-free.
inline size_t EncodeYield(uint64_t for_ms, char* buf, size_t cap) noexcept {
  if (for_ms > kMaxYieldMs) return 0;
  return EncodeNumberLine(kYieldPrefix, for_ms, buf, cap);
}

// Parses one yield line (with or without its trailing "\n" or "\r\n") in exactly the form
// EncodeYield writes; nullopt for anything else, a for_ms above kMaxYieldMs included.
// Allocation-free.
inline std::optional<uint64_t> ParseYield(std::string_view line) noexcept {
  const std::optional<uint64_t> ms = ParseNumberLine(kYieldPrefix, line);
  if (!ms || *ms > kMaxYieldMs) return std::nullopt;
  return ms;
}

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_CONTROL_H_
