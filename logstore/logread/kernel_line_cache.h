// Decoding a log's kernel lines once per distinct launch configuration.
//
// 1. A log repeats itself: a training step launches the same kernel configurations again and
//    again, and the kernel lines of one configuration, in the encoder's layout, differ only in
//    their first members (header, tid, device, context, stream, correlation_id). From `"api":` to
//    the end of the line (the tail: names, dimensions, attributes, occupancy; about 1 KB) they are
//    the same bytes.
// 2. KernelLineCache decodes lines as schema::LineDecoder does and keeps, per distinct tail, the
//    event decoded. A later line whose head has the encoder's layout and whose tail is the same
//    bytes takes that event and reads only the head's integers.
// 3. The result is LineDecoder's, field for field:
//    - JSON syntax, member names and ranges are decided by the bytes, and after a head of plain
//      members the same tail bytes give the same verdict and the same fields;
//    - a repeated member name is the one way a tail could change a head field (the last counts):
//      a tail is kept only when it holds no backslash (no escaped name) and none of the head's
//      member names, and only when LineDecoder's decode of its line agreed with the head's own
//      reading;
//    - the head is the field table's (cuflight/schema/event_fields.h): the header's members, then
//      the kernel event's up to its first that is not an integer, each with the table's range;
//      its integers must be plain JSON integers (no sign, no leading zero, no fraction or
//      exponent).
//    Anything else (another type, another member order, an escape, `1e3`) goes to LineDecoder.
//    tests/logstore/kernel_line_cache_test.cc holds the two together on encoded, mutated and
//    hostile lines.
// 4. Bounded: kSets x kWays tails (about 2 MB), the least recently taken of a set replaced. A log
//    with more configurations than that is read correctly, only more of it through LineDecoder.
// 5. Like LineDecoder it reuses the result's storage, through LineDecoder's (KernelOf): the
//    strings of a kernel event that a line of another type replaces are kept for the next result
//    that becomes a kernel event.
#ifndef CUFLIGHT_LOGSTORE_LOGREAD_KERNEL_LINE_CACHE_H_
#define CUFLIGHT_LOGSTORE_LOGREAD_KERNEL_LINE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/line_decoder.h"

namespace cuflight::logread::internal {

class KernelLineCache {
 public:
  static constexpr size_t kSets = 256;
  static constexpr size_t kWays = 4;

  // As LineDecoder::Decode: sets *result to what schema::Decode(line) returns, reusing its
  // storage, and returns result->reason. Never throws; one per thread.
  schema::Reason Decode(std::string_view line, schema::DecodeResult* result) noexcept;

  // As LineDecoder::last_type().
  std::string_view last_type() const { return last_type_; }

  // Lines taken from the cache, and lines given to LineDecoder.
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    uint64_t hash = 0;
    uint64_t used = 0;  // the line count when last taken; 0: empty
    std::string tail;
    schema::OwnedKernelEvent event;
  };

  // The head of `line` in the encoder's layout, and where its tail begins; false otherwise.
  // Only its header and head members are meaningful.
  static bool ReadHead(std::string_view line, schema::OwnedKernelEvent* head,
                       size_t* tail_begin) noexcept;
  // Whether a tail may be kept (3.).
  static bool Cacheable(std::string_view tail) noexcept;
  static bool SameHead(const schema::OwnedKernelEvent& head,
                       const schema::OwnedKernelEvent& e) noexcept;

  // Hands the line to LineDecoder.
  schema::Reason DecodeFully(std::string_view line, schema::DecodeResult* result) noexcept;

  schema::LineDecoder decoder_;
  schema::OwnedKernelEvent head_;  // the head of the line being decoded
  // kSets x kWays entries, made on the first line in the encoder's layout; none (and every line
  // to LineDecoder) when that allocation failed.
  std::vector<Entry> entries_;
  bool no_cache_ = false;
  std::string_view last_type_;
  uint64_t lines_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

}  // namespace cuflight::logread::internal

#endif  // CUFLIGHT_LOGSTORE_LOGREAD_KERNEL_LINE_CACHE_H_
