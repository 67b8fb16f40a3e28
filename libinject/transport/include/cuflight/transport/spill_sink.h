// Where a Sender writes the lines that cannot reach a collector, when it is given one
// (SenderOptions::spill; docs/spill.md). The transport only defines this interface: the
// implementation, cuflight::spill::SpillWriter, writes JSONL files in the collector's layout.
//
// Contract between the two sides:
//  1. The sink is a sequence of files numbered from 1, one open at a time. Before each line it
//     spills (a held line, or a preamble line on its own at Flush), the sender calls
//     PrepareLine(bytes): the sink opens its first file or rotates to a new one there, and says
//     which file the line will go to. A number the sender has not seen means a new, empty file:
//     the sender then writes its preamble lines there first (AppendLine, with no PrepareLine in
//     between), merged by seq with the held lines exactly as on a new connection, so every file
//     starts with process_start and its device events.
//  2. AppendLine never rotates. A line is either written whole or not at all.
//  3. A refusal (PrepareLine 0, AppendLine false) means the spill is full or disabled: the sender
//     keeps the line and tries again no sooner than one flush_interval later.
//  4. Called only from the sender's owner thread, never concurrently; never throws.
#ifndef CUFLIGHT_TRANSPORT_SPILL_SINK_H_
#define CUFLIGHT_TRANSPORT_SPILL_SINK_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cuflight::transport {

class SpillSink {
 public:
  virtual ~SpillSink() = default;

  // Makes the sink ready for a line of `bytes` bytes (the first file is opened, or the current
  // one rotated when the line would take it past its rotation size). Returns the number of the
  // file the line goes to (from 1, one higher for every new file), or 0 when the line would be
  // refused: the spill is full (the line would take it past its byte limit) or disabled.
  virtual uint64_t PrepareLine(size_t bytes) noexcept = 0;

  // Appends one complete line, the bytes of `first` followed by those of `second` (a line may be
  // stored in two pieces; `second` is often empty), together ending in '\n', to the current file.
  // Returns false, with nothing of the line in the file, when it is refused: no file is open, the
  // spill is full or disabled, or an error occurred (which disables it).
  virtual bool AppendLine(std::string_view first, std::string_view second) noexcept = 0;

 protected:
  SpillSink() = default;
  SpillSink(const SpillSink&) = default;
  SpillSink& operator=(const SpillSink&) = default;
};

}  // namespace cuflight::transport

#endif  // CUFLIGHT_TRANSPORT_SPILL_SINK_H_
