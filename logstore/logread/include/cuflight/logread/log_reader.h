// Reading collector logs back: which files a command line names, and the events of one file.
//
// 1. A log file is newline-delimited JSON events (schema v1), as the collector writes them
//    (logstore/files/segment_names.h) or as a process spills them: plain, or zstd-compressed.
//    The compression is recognised by the zstd frame magic in the first bytes, never by the name.
// 2. Damage is tolerated and said, not fatal: an incomplete last line (the writer was killed in the
//    middle of it) is skipped and counted as torn; a complete line that schema::Decode rejects is
//    skipped and counted as rejected. Each gets a one-line note naming the file and line.
// 3. A file that is not a log at all is an error, so a wrong path gives one clear line instead of
//    a report of nothing: an empty file, binary data, or a first complete line that is not a
//    cuflight event (not JSON, no event header, or a schema version this build cannot read).
// 4. Lines of a type this build does not know (a newer minor version, e.g. `process_crash` read by
//    an older cuflight) are skipped and counted, not rejected (schema/README.md, versioning rule);
//    ReadLogFiles can hand their type name and header to a reader that shows them generically.
// 5. Lines are decoded by schema::LineDecoder (Decode's result, at about the speed the collector
//    validates them), the kernel lines of a configuration already read taken from a cache
//    (kernel_line_cache.h: the same result, without decoding again). ReadLogFiles reads and splits the files on one thread, decodes batches of
//    lines on worker threads (one large file as well as many small ones), and delivers the events
//    on the calling thread in file and line order; the batches in flight are bounded
//    (ReadOptions), whatever the size of the logs.
#ifndef CUFLIGHT_LOGREAD_LOG_READER_H_
#define CUFLIGHT_LOGREAD_LOG_READER_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/schema/events.h"

namespace cuflight::logread {

// Where an event came from. `file` points at the path passed to ReadLogFile, valid during the
// callback only; `line` is 1-based. `config`: for a kernel event expanded from an interned launch
// (docs/protocol.md, "Interned configurations"), the id of its configuration in the file's
// sequence (its kernel_config's `config`), else 0. Within one file every kernel event with the
// same `config` repeats the same configuration members (device, context, stream, names, block,
// cluster, resources, occupancy but the per-grid waves): a reader may key what it derives from
// them by (file, config) instead of looking them up per launch.
struct Origin {
  const std::filesystem::path* file;
  uint64_t line;
  uint64_t config = 0;
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

using OnEvent = std::function<void(const schema::OwnedEvent&, const Origin&)>;

// A line of an event type this build does not know (4.): skipped and counted in
// unknown_type_lines, and given to ReadOptions::on_unknown. `type` is valid during the callback.
struct UnknownEvent {
  std::string_view type;  // e.g. "stall", read by a build older than that event type
  schema::Header header;
};
using OnUnknownEvent = std::function<void(const UnknownEvent&, const Origin&)>;

// How far ReadLogFiles has come.
struct ReadProgress {
  uint64_t files = 0;       // files to read
  uint64_t files_done = 0;  // files whose events have all been delivered
  uint64_t bytes = 0;       // their sizes on disk, in all
  uint64_t bytes_read = 0;  // read from disk so far (a zstd file counts when it is done)
  uint64_t events = 0;      // events delivered
  double seconds = 0;       // since ReadLogFiles began
};

struct ReadOptions {
  // Threads that decode lines: 0 picks one per core the process may run on (its affinity mask:
  // taskset, a container's cpuset) but one, for the calling thread, and none when that is one
  // core; 1 or more: that many. With decoder threads, one more thread reads and splits the
  // files. Without (0 on one core, or `sequential`) everything runs on the calling thread.
  unsigned threads = 0;
  bool sequential = false;
  // Lines travel in batches of kChunkEvents; at most 2 x threads + 4 batches (their text and
  // their decoded events) exist at once, so memory stays bounded whatever the size of the logs.
  static constexpr size_t kChunkEvents = 1024;
  // Lines of unknown types (4.); may be empty.
  OnUnknownEvent on_unknown;
  // Called on the calling thread between batches (reading on that thread alone: every
  // kChunkEvents events), at most every `progress_interval_s`, and once when the read ends
  // successfully; may be empty.
  std::function<void(const ReadProgress&)> on_progress;
  double progress_interval_s = 0.25;
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
bool ReadLogFile(const std::filesystem::path& file, const OnEvent& on_event,
                 ReadSummary* summary, std::string* error);

// Reads `files` as ReadLogFile reads each, and calls on_event for every valid event, on the
// calling thread, file after file in the order given and each file in line order (5.): the same
// calls ReadLogFile would make file by file, and the same *summary. Stops at the first file (in
// that order) that fails, after delivering the events of the files before it and of that file
// up to the failure, and returns false with *error as ReadLogFile does. An exception from a
// callback stops the workers and propagates.
bool ReadLogFiles(const std::vector<std::filesystem::path>& files, const OnEvent& on_event,
                  const ReadOptions& options, ReadSummary* summary, std::string* error);

}  // namespace cuflight::logread

#endif  // CUFLIGHT_LOGREAD_LOG_READER_H_
