// Allocation-free encoder: event struct -> one line of JSON.
//
// Every Encode overload writes one complete JSON object followed by '\n' into buf[0, cap) and
// returns the number of bytes written (the '\n' included). When the line does not fit it returns
// 0: nothing is written past buf[cap - 1], and what it wrote before cap is garbage, never a line.
// Encode never allocates, never throws, keeps no state (any thread may call it), and is defined
// for both storages (View and Owned).
//
// The output is valid JSON, valid UTF-8, and one line, whatever the input strings hold:
//   - `"` and `\` are escaped; control characters 0x00-0x1F use \b \t \n \f \r or \u00XX, and
//     0x7F is written \u007f;
//   - well-formed UTF-8 passes through unchanged, except U+2028 and U+2029, written \u2028 and
//     \u2029 (line separators to some readers);
//   - each ill-formed UTF-8 subsequence (stray continuation byte, overlong form, surrogate, code
//     point above U+10FFFF, sequence cut short) becomes U+FFFD, one per maximal subpart as the
//     Unicode standard recommends (and as Python's errors="replace" does).
// Numbers:
//   - integers are written exactly (std::to_chars);
//   - doubles are written shortest round-trip (std::to_chars), so Decode returns the same value;
//     NaN and infinities are written as 0; occupancy fractions are clamped to [0, 1] and `waves`
//     to >= 0, so floating-point noise never makes a line fail validation;
//   - the what-if fields (`regs_for_next_block`, `smem_for_next_block`) and process_start's
//     `uid` are null when negative.
// Stall events: `occupancy` is clamped like the kernel event's; names are written as given (the
// injector cuts them to kMaxStallNameBytes).
// Optional members: `cluster` (and `cluster_occupancy`, when occupancy.has_cluster) only when
// the kernel's `cluster` is set; `graph_id` and `graph_node_id` each only when set. Every other
// member, `cooperative`, `config` and the counters added in later minor versions included, is
// always written.
// Integer fields outside the ranges of the JSON Schema (a negative `tid`, a carveout of 200) are
// written as given; Decode rejects such a line with kOutOfRange.
#ifndef CUFLIGHT_SCHEMA_ENCODER_H_
#define CUFLIGHT_SCHEMA_ENCODER_H_

#include <cstddef>

#include "cuflight/schema/events.h"

namespace cuflight::schema {

template <class S>
size_t Encode(const BasicProcessStartEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicDeviceEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicKernelEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicKernelTimeEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicApiErrorEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicStatsEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicProcessEndEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicProcessLostEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicProcessCrashEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicStallEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicKernelConfigEvent<S>& event, char* buf, size_t cap) noexcept;
template <class S>
size_t Encode(const BasicLaunchEvent<S>& event, char* buf, size_t cap) noexcept;

// The occupancy fields alone, as one JSON object line with the `kernel` event's names and
// formatting (`cluster_occupancy` only when o.has_cluster), for tools that print a calculation
// rather than an event. Same return and buffer contract as Encode.
size_t EncodeOccupancyFields(const OccupancyFields& o, char* buf, size_t cap) noexcept;

// The event held, as above; 0 also when `event` is valueless.
size_t Encode(const Event& event, char* buf, size_t cap) noexcept;
size_t Encode(const OwnedEvent& event, char* buf, size_t cap) noexcept;

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_ENCODER_H_
