// Reading collector logs back: which files a command line names, and the events of one file.
//
// 1. A log file is newline-delimited JSON events (schema v1), as the collector writes them
//    (collector/daemon/segment_names.h) or as a process spills them: plain, or zstd-compressed.
//    The compression is recognised by the zstd frame magic in the first bytes, never by the name.
// 2. Damage is tolerated and said, not fatal: an incomplete last line (the writer was killed in the
//    middle of it) is skipped and counted as torn; a complete line that schema::Decode rejects is
//    skipped and counted as rejected. Each gets a one-line note naming the file and line.
// 3. A file that is not a log at all is an error, so a wrong path gives one clear line instead of
//    a report of nothing: an empty file, binary data, or a first complete line that is not a
//    cuflight event (not JSON, no event header, or a schema version this build cannot read).
// 4. Lines of a type this build does not know (a newer minor version, e.g. `process_crash` read by
//    an older cuflight) are skipped and counted, not rejected (schema/README.md, versioning rule).
#ifndef CUFLIGHT_LOGREAD_LOG_READER_H_
#define CUFLIGHT_LOGREAD_LOG_READER_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cuflight/schema/events.h"

namespace cuflight::logread {

// Where an event came from. `file` points at the path passed to ReadLogFile, valid during the
// callback only; `line` is 1-based.
struct Origin {
  const std::filesystem::path* file;
  uint64_t line;
};

// Counters of what ReadLogFile read. ReadLogFile adds to them, so one summary can span files.
struct ReadSummary {
  uint64_t files = 0;  // files read (also those that failed part way)
  uint64_t lines = 0;  // complete lines, plus torn last lines
  uint64_t events = 0;
  uint64_t torn_lines = 0;      // an incomplete last line of a file (no '\n'), skipped
  uint64_t rejected_lines = 0;  // complete lines schema::Decode rejected, skipped
  uint64_t unknown_type_lines = 0;  // valid header, `type` unknown to this build, skipped
  uint64_t compressed_files = 0;    // files read as zstd
  // One line per torn or rejected line, e.g. "torn last line 12 skipped in /x/a.jsonl (17 bytes)",
  // at most kMaxNotes; then one line saying how many more there were.
  std::vector<std::string> notes;
  uint64_t notes_left_out = 0;  // torn/rejected lines beyond kMaxNotes, not in `notes`

  static constexpr size_t kMaxNotes = 20;
};

// Files named by `paths`: a file as given (any name); a directory recursively: its *.jsonl and
// *.jsonl.zst files (collector logs and spill files; not *.zst.tmp leftovers), without following
// symlinked directories, skipping empty ones (the collector's active file is empty right after a
// rotation; a file named explicitly is always taken, and ReadLogFile refuses it when empty). The result is sorted by path, except that the segments of one collector
// stream come in segment order with the active file last (segment_names.h), and holds each file
// once even when two arguments name it. Returns false with *error, one line naming the path, when
// a path does not exist, cannot be read, is neither a file nor a directory, or is a directory
// holding no non-empty log file, or when `paths` is empty.
bool ExpandLogPaths(const std::vector<std::string>& paths,
                    std::vector<std::filesystem::path>* files, std::string* error);

// Reads one file (plain or zstd, by content) and calls on_event for every valid event in file
// order, adding to *summary. Returns false with *error (one line naming the file) when the file
// cannot be opened or read, is not valid zstd, or is not a log at all (see 3. above); events of
// the file passed to on_event before a read error was found stay delivered. A torn last line is
// tolerated and counted. on_event may throw; the exception propagates.
bool ReadLogFile(const std::filesystem::path& file,
                 const std::function<void(const schema::OwnedEvent&, const Origin&)>& on_event,
                 ReadSummary* summary, std::string* error);

}  // namespace cuflight::logread

#endif  // CUFLIGHT_LOGREAD_LOG_READER_H_
