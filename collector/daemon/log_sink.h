// The collector's event log: one JSONL stream per producer process, rotated into zstd-compressed
// segments, deduplicated by seq, recovered after a crash, trimmed by retention.
//
// 1. Files (names and the sanitising rule: segment_names.h): the active file
//    <dir>/<YYYY-MM-DD>/<base>.jsonl (<base> names the stream: see ProcessKey), and closed
//    segments <base>.<NNNNNN>.jsonl.zst numbered from 1 in the order written.
// 2. Hot path: Append copies the line into the stream's buffer (no syscall; no allocation once
//    the buffer has grown to a flush's worth); Flush issues one write(2) per stream with data.
// 3. Rotation: when the active file reaches rotate_bytes after a Flush, it is renamed to
//    <base>.<N>.jsonl, a new active file is opened, and the segment worker (segment_worker.h)
//    compresses it to <base>.<N>.jsonl.zst (temp file, fsync, rename) and then removes the
//    plain copy. One compression at a time, off the daemon thread.
// 4. Durability: write(2) on Flush (what acks cover); fdatasync every fsync_interval, on the
//    worker thread, via Tick. A round of fdatasyncs is queued only when the previous one has
//    finished (a slow disk skips rounds, counted in fsync_rounds_skipped), so the descriptors
//    the worker holds stay bounded by the number of streams plus a few (segment_worker.h).
// 5. Crash recovery (Open): a torn last line of any plain file is cut off and counted; stale
//    "*.jsonl.zst.tmp" files are removed; a plain segment whose .zst exists is removed, one
//    without it is compressed again. A kill -9 at any moment leaves every file readable.
//    Acquire recovers a stream's highest stored seq from its newest file; when that file cannot
//    be read (EMFILE, EIO, a corrupt .zst) Acquire fails, counted in recovery_failures, rather
//    than go on as if the log were empty (which would store the stream's seqs a second time).
// 6. Errors (ENOSPC, EACCES, ...): never fatal. The data stays buffered and is retried on every
//    Flush (the daemon also flushes on its timer while has_pending(): a producer whose window
//    is full sends nothing that would trigger one); write_errors counts failures, spdlog gets
//    one line per kind per 10 s. The buffers are bounded by max_pending_bytes: past it Append
//    refuses lines (see Append). What is still buffered when the sink is destroyed is counted
//    in one error line (those lines were never acknowledged).
// 7. The directory (log_dir.h): checked at Open (owner, mode) and never left through a symbolic
//    link: every file is opened, renamed and removed relative to it with O_NOFOLLOW.
// 8. Retention runs on a thread of its own (retention.h), so a directory of many files never
//    stalls the daemon thread; it never removes a file a live stream or a recovery still needs.
//
// Threads: every member function must be called from one thread (the daemon's), except stats(),
// which any thread may call. The worker and retention threads are internal.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_LOG_SINK_H_
#define CUFLIGHT_COLLECTOR_DAEMON_LOG_SINK_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "log_dir.h"
#include "segment_error_log.h"

namespace cuflight::collector {

class RetentionThread;
class SegmentWorker;

// Identity of one producer stream (docs/collector.md, "Process identity"); it names the file.
struct ProcessKey {
  std::string hostname;  // from process_start
  std::string exe;       // from process_start (basename used in file names)
  int32_t pid = 0;       // the pid the collector names the process by (see Collector)
  int64_t start_ns = 0;  // from process_start
  // The producer's instance id (0: none reported) and what the collector verified about the
  // writer ("u<uid>", "tcp", "t<token>"). An empty owner gives the short name
  // <host>-<exe>-<pid>-<start_ns>; otherwise <host>-<exe>-<pid>-<start_ns>-<instance_id>-<owner>.
  uint64_t instance_id = 0;
  std::string owner{};
};

struct LogSinkOptions {
  std::filesystem::path dir;
  // The group whose members' processes are recorded (--socket-group): Open refuses a directory
  // that group can read (log_dir.h). Files are created 0600 and directories 0700 regardless.
  std::optional<gid_t> socket_group;
  uint64_t rotate_bytes = 64ull << 20;             // 0 = never rotate
  uint64_t retain_bytes = 0;                       // 0 = no size limit
  int retain_days = 0;                             // 0 = no age limit
  std::chrono::milliseconds fsync_interval{1000};  // 0 = at every Tick
  // How often Tick starts a retention pass (a directory scan, on the retention thread): 0 = at
  // every Tick (a pass still running is not started again).
  std::chrono::milliseconds retention_interval{10000};
  // Bound on data appended but not yet written (all streams together), e.g. while the disk is
  // full; 0 = no bound. 128 MiB: about a quarter of a second of the daemon's peak input.
  uint64_t max_pending_bytes = 128ull << 20;
  // zstd level of closed segments. Level 1 compresses kernel-event JSONL more than 10x at about
  // 800 MB/s per core, ahead of the daemon's peak input (1.5 M events/s of ~450 bytes); level 3
  // runs at about half that speed. A worker that falls behind leaves segments waiting as plain
  // files, nothing is lost.
  int zstd_level = 1;
};

struct LogSinkStats {
  uint64_t bytes_written = 0;       // bytes passed to write(2) successfully
  uint64_t lines_written = 0;       // lines whose bytes were all written
  uint64_t duplicates_skipped = 0;  // Append calls with seq <= highest_seq
  uint64_t segments_rotated = 0;    // active files closed into segments
  uint64_t torn_lines_trimmed = 0;  // unterminated last lines cut off (Open, Acquire)
  uint64_t files_removed_by_retention = 0;
  uint64_t write_errors = 0;          // failed open/write/rename/fsync/compression calls
  uint64_t lines_refused = 0;         // lines not stored because of max_pending_bytes
  uint64_t segments_compressed = 0;   // .zst segments completed by the worker
  uint64_t pending_bytes = 0;         // appended, not yet written (as of the last Flush)
  uint64_t retention_over_limit = 0;  // retention passes that could not get under retain_bytes
  uint64_t fsync_rounds_skipped = 0;  // periodic fsync rounds skipped: the previous one still ran
  uint64_t recovery_failures = 0;     // Acquire calls failed: the highest seq could not be read
  uint64_t lines_abandoned = 0;       // lines still unwritten when the sink was destroyed
};

// The file in a log directory its writer holds an exclusive flock(2) on.
inline constexpr char kLogDirLockFileName[] = ".cuflight-collector.lock";

class LogSink {
 public:
  // Creates the directory if needed (LogDir::Open: owner and mode are checked) and recovers
  // existing files: a torn (unterminated) last line of any active .jsonl file is trimmed and
  // counted. Returns nullptr and sets *error on failure, also when another LogSink (in any
  // process) has the directory open: Open holds an exclusive flock(2) on
  // <dir>/kLogDirLockFileName until the sink is destroyed; then *in_use (when given) is true.
  static std::unique_ptr<LogSink> Open(const LogSinkOptions& options, std::string* error,
                                       bool* in_use = nullptr);

  // Flushes what is buffered, hands the open files to the worker for a last fdatasync, and stops
  // the worker after its running job (queued compressions are finished by the next Open) and a
  // retention pass early. Lines that still cannot be written are counted in one error line.
  ~LogSink();
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  class Stream;  // one producer process's log

  // The stream for `key`: the same key gives the same stream, also across a collector restart
  // (the file <dir>/<YYYY-MM-DD of start_ns>/<base>.jsonl is found again,
  // names sanitised). Never nullptr on success; nullptr + error if the file cannot be opened.
  // Each Acquire must be matched by one Release; the pointer stays valid until then. Acquiring
  // again clears the stream's refusing state (a new connection retransmits what was refused).
  // Also nullptr + error when the stream's highest stored seq cannot be recovered (header note
  // 5): the caller refuses the producer, which keeps its events and tries again later.
  Stream* Acquire(const ProcessKey& key, std::string* error);

  // Highest seq stored for this process (from memory, or recovered from the log tail, including
  // rotated .jsonl.zst segments), or nullopt if none.
  std::optional<uint64_t> highest_seq(const Stream* stream) const;

  // Highest seq whose line has been handed to write(2) completely (the value to acknowledge), or
  // nullopt if none. Equals highest_seq after a Flush that met no write error.
  std::optional<uint64_t> written_seq(const Stream* stream) const;

  // Names the file the stream's next appended line goes to: another number once that file is
  // closed (a rotation, a reopen) or for another Stream. Lines appended with the same number go
  // to the same file. For what a file must repeat to be readable alone (interned kernel
  // configurations, docs/protocol.md).
  uint64_t file_serial(const Stream* stream) const;

  // Stores one complete line (ends in '\n'; one is added if missing) with its seq. Returns false
  // without storing if seq <= highest_seq (a duplicate: counted in duplicates_skipped), or if the
  // stream is refusing: once storing would exceed max_pending_bytes, the line and every later
  // one of this stream are refused (lines_refused) until the stream is Acquired again, so the
  // stored seqs never get a hole; refusing() then tells the caller to drop the connection.
  // Buffered; see Flush. An empty line is refused without counting.
  bool Append(Stream* stream, uint64_t seq, std::string_view line);

  // True once Append refused a line of this stream for lack of buffer space (see Append).
  bool refusing(const Stream* stream) const;

  // Appends a collector-made line (process_lost) regardless of seq; highest_seq is unchanged.
  // Dropped (lines_refused) only when the buffers exceed max_pending_bytes by more than 1 MiB.
  void AppendCollectorEvent(Stream* stream, std::string_view line);

  // True while some stream holds data that a Flush has not written yet (a write failed).
  bool has_pending() const { return !dirty_.empty(); }

  // write(2)s everything buffered (all streams). After it returns, acks may be sent for what was
  // appended before (for each stream, up to written_seq). Rotation happens here when a file
  // passes rotate_bytes (the closed segment is compressed to .jsonl.zst on the worker thread).
  void Flush();

  // The stream's producer disconnected; it may be Acquired again later (reconnect). Writes the
  // stream's buffered lines; the pointer is invalid afterwards. Call AppendCollectorEvent (the
  // process_lost line) before Release.
  void Release(Stream* stream);

  // Periodic work: fsync on its interval (on the worker thread), a retention pass by total size
  // and age (retention.h; on the retention thread) every retention_interval, and a retry of
  // failed compressions. Returns without waiting for either. `now` is the wall clock (mtimes are
  // compared with it); call it a few times per second.
  void Tick(std::chrono::system_clock::time_point now);

  // SIGHUP: close and reopen every file (after logrotate moved them). Buffered data is written to
  // the old files first; new files are created where the old ones were.
  void Reopen();

  // Counters since Open. Any thread.
  LogSinkStats stats() const;

  // Blocks until the worker has no queued or running job (compressions, fsyncs) and no retention
  // pass runs. For shutdown paths that want every segment compressed, and for tests.
  void FinishBackgroundWork();

 private:
  explicit LogSink(const LogSinkOptions& options);

  bool Recover(std::string* error);
  bool OpenActiveFile(Stream* stream, std::string* error);
  bool RecoverHighestSeq(Stream* stream, std::string* error);
  void RetentionPass(std::chrono::system_clock::time_point now);
  // Writes the stream's buffer; true when nothing is left in it.
  bool WritePending(Stream* stream);
  void Rotate(Stream* stream);
  void CloseFile(Stream* stream);
  void Forget(Stream* stream);

  struct Counters {
    std::atomic<uint64_t> bytes_written{0};
    std::atomic<uint64_t> lines_written{0};
    std::atomic<uint64_t> duplicates_skipped{0};
    std::atomic<uint64_t> segments_rotated{0};
    std::atomic<uint64_t> torn_lines_trimmed{0};
    std::atomic<uint64_t> files_removed_by_retention{0};
    std::atomic<uint64_t> write_errors{0};
    std::atomic<uint64_t> lines_refused{0};
    std::atomic<uint64_t> segments_compressed{0};
    std::atomic<uint64_t> pending_bytes{0};
    std::atomic<uint64_t> retention_over_limit{0};
    std::atomic<uint64_t> fsync_rounds_skipped{0};
    std::atomic<uint64_t> recovery_failures{0};
    std::atomic<uint64_t> lines_abandoned{0};
  };

  const LogSinkOptions options_;
  Counters counters_;
  logstore::RateLimitedLog log_;
  std::unique_ptr<logstore::LogDir> dir_;
  // Held by the retention thread around each removal, and by this thread while it pins a stream
  // or creates a file: see retention.h.
  std::mutex files_mu_;
  std::unordered_set<std::string> pinned_;  // keys of streams_ (guarded by files_mu_)
  // Streams by "<date>/<base>": the acquired ones, and released ones whose buffer could not be
  // written yet.
  std::unordered_map<std::string, std::unique_ptr<Stream>> streams_;
  std::vector<Stream*> dirty_;          // streams with buffered data, each once
  std::vector<Stream*> dirty_scratch_;  // reused by Flush
  uint64_t next_file_serial_ = 1;
  // Highest segment number on disk or used, by "<date>/<base>".
  std::unordered_map<std::string, uint64_t> last_segment_;
  uint64_t pending_total_ = 0;
  std::vector<std::string> dirs_to_sync_;  // date directories with new names
  std::chrono::system_clock::time_point last_fsync_{};
  std::chrono::system_clock::time_point last_retention_{};
  bool retention_ran_ = false;
  int lock_fd_ = -1;
  std::unique_ptr<SegmentWorker> worker_;
  std::unique_ptr<RetentionThread> retention_;  // last: its passes use everything above
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_LOG_SINK_H_
