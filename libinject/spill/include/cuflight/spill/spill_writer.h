// The spill: JSONL files, inside the application's process, for the events that cannot reach a
// collector (docs/spill.md). The files have the collector's layout (cuflight/schema/log_layout.h),
// so `cuflight report` reads them like collector logs.
//
// Design:
//  1. Files: <dir>/<YYYY-MM-DD>/<base>.jsonl is the active file, appended to; when a line would
//     take it past rotate_bytes (and it is not empty) it is renamed to the next segment
//     <base>.<NNNNNN>.jsonl (numbered from 1, after any segment of the same name already there)
//     and a new active file starts. Segments stay uncompressed: no compression runs inside the
//     application's process. <base> and the date come from (host, exe, pid, start_ns, and the
//     instance id and owner when given), as the collector names the same process's log. Directories
//     are created 0700, files 0600, opened O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC; nothing is
//     opened before the first line.
//  2. Retention: the bytes this writer has in its files (written, plus an active file that was
//     already there) never pass max_bytes: a line that would is refused. Nothing written is ever
//     deleted or truncated.
//  3. Writes are plain write(2) loops (EINTR, short writes); a line is in a file whole or not at
//     all (a failed write is cut off again with ftruncate). No fsync: what was written survives
//     the process, not the machine.
//  4. Errors never throw and never stop the application: the first error (a directory or file
//     that cannot be created or opened, a failed write or rename) disables the writer, which
//     then refuses every line; the first refusal for space is reported too. Each is one line,
//     through `warn` and in message(). At most two lines in all.
//  5. Allocates only in the constructor and when it opens or rotates a file.
// Threads: one owner thread calls everything except stats(), which any thread may call.
#ifndef CUFLIGHT_SPILL_SPILL_WRITER_H_
#define CUFLIGHT_SPILL_SPILL_WRITER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "cuflight/transport/spill_sink.h"

namespace cuflight::spill {

struct SpillWriterOptions {
  std::string dir;  // the spill directory (created if missing)
  // The process the events come from: names the files as the collector would.
  std::string host;
  std::string exe;
  int32_t pid = 0;
  int64_t start_ns = 0;
  // Non-zero: the longer name <host>-<exe>-<pid>-<start_ns>-<instance_id>-<owner> (the
  // collector's for a producer that reports an instance id; owner "u<uid>" is what it names a
  // Unix-socket producer of that uid), so a process after exec() spills to files of its own.
  uint64_t instance_id = 0;
  std::string owner;
  // Rotation size of the active file (0: never rotate), and the most bytes in all files.
  uint64_t rotate_bytes = uint64_t{64} << 20;
  uint64_t max_bytes = uint64_t{1} << 30;
  // Receives each problem as one line, without prefix or newline; may be empty. Called on the
  // owner thread, from inside PrepareLine/AppendLine; must not throw.
  std::function<void(std::string_view)> warn;
};

struct SpillWriterStats {
  uint64_t lines = 0;             // lines written (preamble repetitions included)
  uint64_t bytes = 0;             // bytes in this writer's files (see design point 2)
  uint64_t files = 0;             // active files opened (the first one, then one per rotation)
  uint64_t rotations = 0;         // active files renamed to segments
  uint64_t refused_full = 0;      // lines refused because of max_bytes
  uint64_t refused_disabled = 0;  // lines refused after an error
  bool disabled = false;
};

class SpillWriter final : public transport::SpillSink {
 public:
  // Computes the file names; opens nothing. Never throws: if memory runs out the writer is
  // disabled from the start (with its message).
  explicit SpillWriter(SpillWriterOptions options) noexcept;
  ~SpillWriter() override;  // closes the active file, which stays as it is (never renamed)
  SpillWriter(const SpillWriter&) = delete;
  SpillWriter& operator=(const SpillWriter&) = delete;

  // transport::SpillSink (see spill_sink.h). PrepareLine opens the first file, or rotates when
  // the active file is not empty and `bytes` more would take it past rotate_bytes; returns the
  // active file's number (1 for the first file opened, +1 per rotation), or 0 when the line
  // would pass max_bytes or the writer is disabled. AppendLine writes one complete line
  // (ending in '\n'; otherwise it is refused, counting nothing) to the active file, or returns
  // false with nothing written.
  uint64_t PrepareLine(size_t bytes) noexcept override;
  bool AppendLine(std::string_view first, std::string_view second = {}) noexcept override;

  // PrepareLine and AppendLine for one line (ending in '\n').
  bool WriteLine(std::string_view line) noexcept;

  // The directory the files go to, <dir>/<YYYY-MM-DD> ("" if memory ran out).
  const std::string& date_dir() const noexcept { return date_dir_; }
  // The path of the active file, <date_dir>/<base>.jsonl ("" if memory ran out).
  const std::string& active_path() const noexcept { return active_path_; }
  // The file names' <base> ("" if memory ran out).
  const std::string& base_name() const noexcept { return base_; }

  // The last message given to `warn` ("" if none). Owner thread only.
  std::string_view message() const noexcept { return std::string_view(message_, message_len_); }
  bool disabled() const noexcept { return disabled_.load(std::memory_order_relaxed); }
  SpillWriterStats stats() const noexcept;

 private:
  bool Open() noexcept;
  bool Rotate() noexcept;
  bool WriteAll(std::string_view bytes) noexcept;
  void Disable(std::string_view what, std::string_view path, int err) noexcept;
  void Report(std::string_view line) noexcept;

  SpillWriterOptions options_;
  std::string base_;
  std::string date_dir_;
  std::string active_path_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;    // bytes in the active file
  uint64_t total_bytes_ = 0;   // design point 2
  uint64_t file_number_ = 0;   // of the active file; 0 before the first
  uint64_t next_segment_ = 1;  // number of the next segment a rotation creates
  bool warned_full_ = false;

  char message_[512] = {};
  size_t message_len_ = 0;

  std::atomic<bool> disabled_{false};
  std::atomic<uint64_t> lines_{0}, bytes_{0}, files_{0}, rotations_{0}, refused_full_{0},
      refused_disabled_{0};
};

}  // namespace cuflight::spill

#endif  // CUFLIGHT_SPILL_SPILL_WRITER_H_
