// One log file -> decoded lines, shared by ReadLogFile (one file, the calling thread) and
// ReadLogFiles (many files, decoded on worker threads). Private to logstore/logread.
#ifndef CUFLIGHT_LOGSTORE_LOGREAD_FILE_READER_H_
#define CUFLIGHT_LOGSTORE_LOGREAD_FILE_READER_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "kernel_line_cache.h"

namespace cuflight::logread::internal {

// Where a file's lines go. Decoding sinks: FileReader asks for a result to decode the next line
// into, then says what the line was. Raw sinks (raw() true): FileReader checks the first line
// (that the file is a log) and hands over every complete line undecoded; the sink decodes them
// (DecodeLine) and counts events, unknown and rejected lines itself.
class LineSink {
 public:
  virtual ~LineSink() = default;
  // The result the next line is decoded into; valid until Event or Unknown, or the next Slot.
  virtual schema::DecodeResult* Slot() = 0;
  // The line just decoded into Slot() is a valid event (line: 1-based).
  virtual void Event(uint64_t line) = 0;
  // The line is of a type this build does not know (`type`, as KernelLineCache::last_type()); its
  // header is in Slot()->header.
  virtual void Unknown(std::string_view type, uint64_t line) = 0;

  virtual bool raw() const { return false; }
  // Raw sinks: complete line `line` (1-based), its text valid during the call.
  virtual void RawLine(std::string_view text, uint64_t line) {
    static_cast<void>(text);
    static_cast<void>(line);
  }
};

enum class LineKind : uint8_t { kEvent, kUnknown, kRejected };

// Decodes line `line` of `file` into *result, counting it in *summary (events, unknown_type_lines,
// or rejected_lines with its note), as ReadLogFile does for every line after the first checks.
LineKind DecodeLine(KernelLineCache& decoder, std::string_view text, uint64_t line,
                    const std::filesystem::path& file, schema::DecodeResult* result,
                    ReadSummary* summary);

// Interned configurations (docs/protocol.md): each file is one sequence. Delivery (in file and
// line order, on the caller's thread) goes through one Expansion: a kernel_config is remembered
// and not delivered (it is no event of its own: `events` does not count it), a launch is
// delivered as the kernel event it stands for, and a launch or description the sequence cannot
// stand for (schema::ExpandVerdict) is counted in rejected_lines with its note.
//
// A launch's kernel event is kept per configuration: the configuration's names and figures are
// written into it when it is first launched in the file, and each launch after that rewrites
// them (schema::Expand, the one expansion) into storage that fits them, so a launch costs no
// allocation and the launch line's own slot keeps its storage for the next line. As many kept
// events as descriptions, which ConfigExpander bounds (schema::kMaxConfigsPerSequence).
class Expansion {
 public:
  // The event to deliver for *event (decoded from line `line` of `file`, counted in *summary):
  // *event itself, the kernel event a launch stands for (held by this Expansion until its next
  // call), or nullptr when nothing is delivered.
  const schema::OwnedEvent* Deliver(schema::OwnedEvent* event, const std::filesystem::path& file,
                                    uint64_t line, ReadSummary* summary);

  // The configuration id the event Deliver returned last was expanded from (Origin::config); 0
  // when it was no expansion.
  uint64_t config() const { return config_; }

 private:
  // Counts what a description or a refusal is (not an event), with a note for a refusal.
  void NotDelivered(const schema::OwnedEvent& event, schema::ExpandVerdict verdict,
                    const std::filesystem::path& file, uint64_t line, ReadSummary* summary);

  schema::ConfigExpander configs_;
  // Per configuration id described in the file, its launches' kernel event (an OwnedKernelEvent).
  std::unordered_map<uint64_t, schema::OwnedEvent> kernels_;
  // Per configuration id below kMaxKnownIds, once launched in the file: its description in
  // configs_ and its kernel event in kernels_, so that a later launch finds both with one load
  // rather than two hash look-ups, each a chain of dependent loads into scattered nodes (its
  // cache misses were most of Deliver's time). Valid as long as the two maps keep those entries:
  // a description never changes once remembered (ConfigExpander refuses another for its id), and
  // the nodes of an unordered_map stay put until erased, which happens only at a new file (where
  // this is cleared too) and for a kernel event that could not be written (whose entry is
  // forgotten here as well).
  struct Known {
    const schema::OwnedKernelConfigEvent* config = nullptr;
    schema::OwnedKernelEvent* kernel = nullptr;
    schema::OwnedEvent* kept = nullptr;  // the alternative of which `kernel` is
  };
  static constexpr uint64_t kMaxKnownIds = 1 << 16;
  std::vector<Known> known_;
  const std::filesystem::path* file_ = nullptr;
  uint64_t config_ = 0;
};

// Reads `file` (plain or zstd, by content) into `sink`, adding to *summary (log_reader.h, 1.-4.).
// Adds the bytes read from the file to *bytes_read as it goes (plain files) or once at the end
// (zstd files), when not null. False with *error naming the file as ReadLogFile says.
bool ReadFileInto(const std::filesystem::path& file, LineSink& sink, ReadSummary* summary,
                  std::atomic<uint64_t>* bytes_read, std::string* error);

// Adds `from` (the summary of files read after those of *to) to *to, notes in order and capped
// at ReadSummary::kMaxNotes as if one reader had read them all.
void AddSummary(const ReadSummary& from, ReadSummary* to);

}  // namespace cuflight::logread::internal

#endif  // CUFLIGHT_LOGSTORE_LOGREAD_FILE_READER_H_
