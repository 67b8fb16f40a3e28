// The exporter's cursor: for each stream of the log directory, how far its events have been
// delivered (exporter.h, design note 2).
//
// The file is one JSON object, {"version":1,"streams":{"<date>/<base>":{"segment":K,
// "offset":N,"finished":B},...}}: segment K (1-based, segment_names.h; the active file is the
// segment after the last closed one) and N bytes of its uncompressed text, always the end of a
// complete line. Save replaces it atomically: "<file>.tmp" is written and fsynced, renamed over
// the file, and the directory fsynced, so a crash leaves the old cursor or the new one.
#ifndef CUFLIGHT_EXPORTER_CURSOR_H_
#define CUFLIGHT_EXPORTER_CURSOR_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace cuflight::exporter {

struct Position {
  uint64_t segment = 1;
  uint64_t offset = 0;

  bool operator==(const Position&) const = default;
  auto operator<=>(const Position&) const = default;
};

struct CursorEntry {
  Position position;
  // The stream's last event read was its end (process_end, process_lost, process_crash): its
  // files are looked at less often (a process that reconnects after a collector restart
  // continues its stream, so it is never given up).
  bool finished = false;

  bool operator==(const CursorEntry&) const = default;
};

// Key: "<date>/<base>" (a date directory and a stream base name).
using Cursor = std::map<std::string, CursorEntry>;

// A cursor holds a few dozen bytes per stream: 64 MiB is about a million streams, far more than
// a log directory holds. A larger file is not read.
inline constexpr uint64_t kMaxCursorBytes = uint64_t{64} << 20;

// Reads `file` into *cursor. A missing file is an empty cursor (true). False with *error (one
// line naming the file) when it cannot be read or is not a cursor, and when it is not the
// collector's own regular file: a symbolic link (not followed), a FIFO or device, a file owned by
// another uid or writable by every user, or one larger than kMaxCursorBytes.
bool LoadCursor(const std::filesystem::path& file, Cursor* cursor, std::string* error);

// Replaces `file` with `cursor` atomically (above). False with *error when a step fails; the
// old file is then untouched.
bool SaveCursor(const std::filesystem::path& file, const Cursor& cursor, std::string* error);

}  // namespace cuflight::exporter

#endif  // CUFLIGHT_EXPORTER_CURSOR_H_
