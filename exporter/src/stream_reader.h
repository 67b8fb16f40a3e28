// The exporter's view of the log directory: its streams (logstore/files' layout,
// cuflight/schema/log_layout.h) and a reader of complete lines from a position in one of a
// stream's segments.
//
// 1. A stream is "<date>/<base>": its closed segments <base>.<K>.jsonl (plain, for seconds) or
//    <base>.<K>.jsonl.zst, and its active file <base>.jsonl, which is segment (last closed + 1)
//    until the collector renames it to that number. Positions count uncompressed bytes.
// 2. Only complete lines are returned: the active file's last line may still be being written
//    (or be torn by a kill, then cut off by the restarted collector, never below a line end), so
//    a position is always a line's end.
// 3. Memory: one read chunk, the current line (at most kMaxLineBytes; a longer one is skipped and
//    reported as such) and, for zstd, the decoder's window.
#ifndef CUFLIGHT_EXPORTER_STREAM_READER_H_
#define CUFLIGHT_EXPORTER_STREAM_READER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "cuflight/base/scoped_fd.h"
#include "segment_file.h"

namespace cuflight::exporter {

// Longer than any line the collector writes (--max-line-bytes is at most 16 MiB).
inline constexpr size_t kMaxLineBytes = (size_t{16} << 20) + 2;

struct StreamFiles {
  std::string date;
  std::string base;
  bool active = false;
  std::map<uint64_t, bool> closed;  // segment number -> compressed
  uint64_t last_closed() const { return closed.empty() ? 0 : closed.rbegin()->first; }
};

// Lists the streams under the open log directory `dir_fd` (its YYYY-MM-DD directories), keyed
// "<date>/<base>". .zst.tmp files are ignored; a segment there both plain and compressed (the
// moment between compression and the removal of the plain copy) is taken as compressed. False
// with *error when the log directory itself cannot be listed; a date directory that cannot be
// is skipped.
bool ListStreams(int dir_fd, std::map<std::string, StreamFiles>* out, std::string* error);

class SegmentReader {
 public:
  enum class Status { kLine, kEnd, kLongLine, kError };

  // Opens `file` (zstd when `compressed`) to read from uncompressed offset `offset` (a line end).
  // nullptr with *error when it cannot be opened (errno kept: ENOENT for a file renamed or
  // removed meanwhile).
  static std::unique_ptr<SegmentReader> Open(const logstore::FileAt& file, bool compressed,
                                             uint64_t offset, std::string* error);
  ~SegmentReader();
  SegmentReader(const SegmentReader&) = delete;
  SegmentReader& operator=(const SegmentReader&) = delete;

  // The next complete line, without its '\n', in *line (valid until the next call). kEnd: no
  // complete line now (a plain file may grow; call again later). kLongLine: a line longer than
  // kMaxLineBytes was skipped (offset() is past it). kError: *error set; stop reading this file.
  Status Next(std::string_view* line, std::string* error);
  // The end of the last line returned or skipped.
  uint64_t offset() const { return offset_; }
  // Bytes of the file not read yet (plain files: its size now minus what was read; zstd files:
  // compressed bytes left).
  uint64_t Remaining() const;
  // The file's inode, to tell whether the active file opened is still the one of that name.
  ino_t inode() const { return inode_; }

 private:
  struct Zstd;
  SegmentReader(int fd, bool compressed);
  // Appends more text to buf_; false at the end of what there is now.
  bool Fill(std::string* error, bool* failed);

  base::ScopedFd fd_;
  const bool compressed_;
  std::unique_ptr<Zstd> zstd_;
  ino_t inode_ = 0;
  uint64_t file_pos_ = 0;   // bytes of the file read
  uint64_t produced_ = 0;   // uncompressed bytes produced (zstd) or read (plain), buf_ included
  uint64_t skip_ = 0;       // uncompressed bytes still to drop before `offset`
  uint64_t offset_ = 0;
  std::string buf_;
  size_t pos_ = 0;          // start of the next line in buf_
  bool skipping_long_ = false;
};

}  // namespace cuflight::exporter

#endif  // CUFLIGHT_EXPORTER_STREAM_READER_H_
