// The `launch` line of one producer, written faster than Encode writes it, byte for byte the
// same (encoder.h stays the one definition of the JSON form; this is a shortcut through it).
//
// 1. Why: with interned configurations nearly every line a producer sends is a launch
//    (docs/protocol.md, "Interned configurations"), and its encoding was the largest part of the
//    sender thread's work per launch (docs/performance.md, 2026-11-29: about 600 of 2,256
//    instructions, 357 of them the integers' digits). The line is mostly fixed text and ten
//    integers, most of which change little from one line to the next.
// 2. The fixed text is written once: the object's start up to `ts_ns` is a literal, the pid's
//    members (`,"pid":P,"seq":`) are made when the encoder is, for the pid it is given. Every
//    key is a constant copied with fixed-size stores, and the room is checked once per line
//    (kMaxLine), not per member.
// 3. What changes little is kept from the last line as text, and only the numbers that change
//    are written: a nanosecond timestamp's 19 digits, of which the 11 above the last 8 change
//    once every 100 ms; `,"tid":T,"correlation_id":`, the same for every launch of a thread; and
//    `,"config":K,"grid":[x,y,z]`, the same for a run of launches of one configuration and grid.
//    Each is made again when its numbers differ from the last line's. So a launch in a run
//    writes three numbers (the time's last 8 digits, seq, correlation_id) and copies the rest.
// 4. The digits are encoder.cc's own (schema/src/digits.h: a table of digit pairs).
// 5. The shape it writes itself is the one a producer sends for a launch found by its record
//    (libinject/src/config_table.h, point 2): no graph ids, no waves or tail_utilization,
//    not recovered, timing_window present or not, its own pid. Any other launch event, and any
//    buffer smaller than kMaxLine, is handed to Encode: the answer is the same either way.
// 6. Held to Encode by LaunchEncoderTest (tests/schema/launch_encoder_test.cc): randomised and
//    edge launches (0, the largest uint64, negative tid and ts_ns, every optional member set and
//    not, times that cross the cached digits' boundary both ways), line for line. The launch
//    table's member count is pinned in launch_encoder.cc: a member added to
//    CUFLIGHT_SCHEMA_LAUNCH (event_fields.h) stops the build until it is written here too.
//
// Thread contract: one encoder per thread (it keeps the last line's time digits); no
// allocation, no exception, no system call.
#ifndef CUFLIGHT_SCHEMA_LAUNCH_ENCODER_H_
#define CUFLIGHT_SCHEMA_LAUNCH_ENCODER_H_

#include <cstddef>
#include <cstdint>

#include "cuflight/schema/events.h"

namespace cuflight::schema {

class LaunchEncoder {
 public:
  // The longest line of point 5's shape, and then some: the room the fast path needs.
  static constexpr size_t kMaxLine = 320;

  // For lines whose header.pid is `pid` (others go through Encode).
  explicit LaunchEncoder(int32_t pid) noexcept;

  // Encode(event, buf, cap)'s line, with its return and buffer contract (encoder.h): the
  // length, or 0 when it does not fit; bytes past the line, never past cap, may be written.
  size_t Encode(const LaunchEvent& event, char* buf, size_t cap) noexcept;

  int32_t pid() const noexcept { return pid_; }

 private:
  int32_t pid_;
  // `,"pid":P,"seq":` (point 2).
  uint8_t pid_members_len_ = 0;
  char pid_members_[32] = {};
  // Point 3. The digits of ts_high_ (a ts_ns / 10^8 >= 1), or none yet (ts_high_ 0).
  int64_t ts_high_ = 0;
  uint8_t ts_high_len_ = 0;
  char ts_high_digits_[16] = {};
  // `,"tid":T,"correlation_id":` for tid_ (tid_len_ 0: none yet).
  int32_t tid_ = 0;
  uint8_t tid_len_ = 0;
  char tid_members_[48] = {};
  // `,"config":K,"grid":[x,y,z]` for config_ and grid_ (shape_len_ 0: none yet).
  uint64_t config_ = 0;
  Dim3 grid_;
  uint8_t shape_len_ = 0;
  char shape_members_[96] = {};
};

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_LAUNCH_ENCODER_H_
