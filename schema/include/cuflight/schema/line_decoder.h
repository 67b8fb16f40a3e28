// Decoding log lines at the speed logs are written: Decode's results, through Validate.
//
// 1. A log is almost all `kernel` (or `launch`) and `kernel_time` lines in the encoder's layout. For such a
//    line LineDecoder runs the validator's fast path in the form that also writes each member
//    into the event as it checks it (one pass, expanded from the field tables, event_fields.h).
// 2. Every other line goes through the validator's general path, which fills the event in its
//    one pass as Decode does, so the message and the header of a rejected line are Decode's.
// 3. The result is the one Decode gives, field for field; tests/schema/line_decoder_test.cc holds
//    the two together on every sample and mutated line the schema tests make.
// 4. It reuses the event storage of the DecodeResult it is given: decoding a kernel or
//    kernel_time line in the encoder's layout into a result that already holds that type
//    allocates nothing once the strings have grown to their size, and the string buffers of a
//    kernel event replaced by another type are kept for the next one.
#ifndef CUFLIGHT_SCHEMA_LINE_DECODER_H_
#define CUFLIGHT_SCHEMA_LINE_DECODER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/schema/decoder.h"
#include "cuflight/schema/validator.h"

namespace cuflight::schema {

class LineDecoder {
 public:
  // Sets *result to what Decode(line) returns (reason, message, header and event), reusing its
  // storage. Returns result->reason. Never throws; one LineDecoder per thread.
  Reason Decode(std::string_view line, DecodeResult* result) noexcept;

  // The `type` of the last line decoded, when it was a known type or a string without escapes;
  // empty otherwise. For a line of a type this build does not know (Reason::kUnknownType): its
  // name, e.g. "stall" read by a build older than that event. Points into that line or into
  // static storage; valid until the line goes away.
  std::string_view last_type() const { return last_type_; }

  // Lines decoded so far by the fast path (1.) and by the general path (2.).
  uint64_t fast_lines() const { return fast_lines_; }
  uint64_t general_lines() const { return general_lines_; }

  // The kernel alternative of *event: as it is when *event holds one, else a new one given the
  // string buffers of a kernel event put aside (4.). For a reader that fills a kernel event
  // itself into results this decoder also fills (logread's kernel line cache). May throw
  // std::bad_alloc.
  OwnedKernelEvent& KernelOf(OwnedEvent* event);

 private:
  OwnedKernelEvent& ResetKernel(OwnedEvent* event);
  OwnedKernelTimeEvent& ResetKernelTime(OwnedEvent* event);
  OwnedLaunchEvent& ResetLaunch(OwnedEvent* event);
  // Keeps the string buffers of the kernel event *event holds, if any, before another type
  // replaces it.
  void PutAside(OwnedEvent* event);
  // Completes *result for a line whose event was read here (1.), from info_.
  Reason ReadFast(DecodeResult* result);

  struct KernelStrings {
    std::string api;
    std::string name;
    std::string demangled;
  };
  // String buffers of kernel events whose result went on to hold another type, for the next
  // result that becomes a kernel event. Bounded: a caller cycles through at most this many
  // results (e.g. the slots of a chunk of events).
  static constexpr size_t kMaxSpare = 4096;

  LineInfo info_;
  ValidateError error_;
  std::vector<KernelStrings> spare_;
  std::string_view last_type_;
  uint64_t fast_lines_ = 0;
  uint64_t general_lines_ = 0;
};

}  // namespace cuflight::schema

#endif  // CUFLIGHT_SCHEMA_LINE_DECODER_H_
