// The collector: accepts producer connections, frames and validates their lines, stores each
// process's events once in its log, acknowledges what is stored, and accounts for every seq.
//
// Design:
//  1. One thread, one epoll set, level-triggered, non-blocking sockets. Each ready connection gets
//     one read of up to kReadChunkBytes per loop turn, so a busy producer cannot starve the others.
//  2. Complete lines are validated in place in the shared read buffer; a connection keeps only its
//     unfinished last line (at most max_line_bytes), so memory is bounded per connection, and the
//     number of connections by max_connections.
//  3. A connection says who it is with process_start (docs/protocol.md) and writes only the
//     stream that names: what the process reports (host, exe, pid, start_ns, instance id) and
//     what the collector verified about the writer, the owner (the peer's uid on the Unix socket;
//     over TCP the connection itself, unless tcp_trust_identity). The rules, and when the
//     kernel's pid wins over the payload's: producer_identity.h. The log stores each seq of a
//     stream at most once; a seq above the highest accounted for opens a gap, counted as lost for
//     that stream, exactly.
//  4. After each loop turn that appended lines: LogSink::Flush() (write(2)), then one cumulative
//     ack per connection with the highest seq stored for its process. An ack that does not fit in
//     the socket buffer waits (only the latest is kept); nothing ever blocks on a producer. An
//     ack write that fails (EPIPE, ECONNRESET: the producer closed or died without reading its
//     acks) ends the acks to that connection, never its reading: the connection is read to its
//     end and every complete line in it stored, since a dead producer sends nothing again.
//  5. A connection that ends without process_end: after reconnect_grace without the same process
//     coming back, process_lost (reason disconnected) is appended to its log. At shutdown,
//     connections are drained (what they already sent is read and stored), then process_lost
//     (reason collector_shutdown) is appended for each process still connected.
//  8. Black boxes (docs/protocol.md, "The black box"): a Unix connection may pass its producer's
//     black box with SCM_RIGHTS, one per connection, and a descriptor of itself; checked, never
//     mapped (producer_blackbox.h). When the connection ends without process_end, the collector
//     watches the producer's pidfd (or asks its /proc directory each tick): once the producer is
//     gone (or at the end of the grace, at least 2 s,
//     if it is gone by then) it reads the black box, stores the events it gives (marked
//     recovered, validated like received lines) with the seqs the producer gave or would have
//     given them, counts the seqs the producer used and the log lacks as lost, and writes
//     process_lost with events_recovered. A producer that comes back, or is still running,
//     keeps what it holds: its black box is not read.
//  6. Limits for a node service of many users: max_connections in all and a share per uid (TCP
//     peers together are one), a handshake timeout before process_start and an idle timeout
//     after it (producers' stats events are a heartbeat). When every slot is taken, an owner
//     with k connections gets one by closing the newest of the owner holding the most, if that
//     one holds k + 2 or more (fair shares: colluding uids cannot keep a new one out).
//     Processes held without a connection (grace, black box) take a slot of their own, bounded
//     the same way (the share per uid, max_connections in all), so the descriptors stay within
//     9 x max_connections + 256 (CheckDescriptorLimit). Every refusal is counted.
//  9. Producers' claims are bounded by what their process could have made (SeqBound): a seq
//     beyond it is rejected and opens no gap, a count beyond it is not taken; both are counted.
//  7. The log's failures do not wait for input: each tick (~100 ms) retries writes that failed
//     (a full disk) and sends the acks they release, since a producer whose window is full sends
//     nothing. Lines the log refused and the producer never sent again count as lost in its
//     process_lost.
// 10. With metrics, a read's counts are added once at its end (before the turn's acks and
//     stats): the lines received and stored by type, and each run of launches in a row of one
//     interned configuration (Metrics::Launches, whose occupancy sums take the same additions
//     in the same order as one launch at a time; a line of another kind ends the run first).
//     Each launch is remembered for its kernel_time as it comes, and not at all for a process
//     with timing off. A scrape during a read may miss that read's counts; after it, it reads
//     what counting one line at a time would have left.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_COLLECTOR_H_
#define CUFLIGHT_COLLECTOR_DAEMON_COLLECTOR_H_

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "collector_options.h"
#include "ingest_stats.h"
#include "log_sink.h"

namespace spdlog {
class logger;
}

namespace cuflight::collector {

class Metrics;

// Why the collector could not start: one line naming the flag, and the exit status (2 for a bad
// value, 1 when the environment prevented it).
struct StartupError {
  int exit_code = 1;
  std::string line;
  bool log_dir_in_use = false;  // another collector holds the log directory
};

class Collector {
 public:
  // Bytes read from one connection per loop turn.
  static constexpr size_t kReadChunkBytes = 256 * 1024;

  // Opens the log sink and the listeners. `metrics` may be null (no metrics); it must outlive the
  // collector. `logger` may be null (spdlog's default logger). Returns nullptr and fills *error.
  // Call on the thread that will call Run() or before starting it.
  static std::unique_ptr<Collector> Create(const CollectorOptions& options, Metrics* metrics,
                                           std::shared_ptr<spdlog::logger> logger,
                                           StartupError* error);
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Serves until RequestStop(), then drains, flushes, removes the socket and returns 0. Returns 1
  // after logging a fatal error of the event loop itself. Call once, from one thread.
  int Run();

  // Both may be called from any thread and from a signal handler (async-signal-safe).
  void RequestStop();
  void RequestReopen();  // LogSink::Reopen() on the loop thread (SIGHUP)

  const std::filesystem::path& socket_path() const { return socket_path_; }
  int tcp_port() const { return tcp_port_; }  // 0 when TCP is off

  // Counters as of the end of the latest loop turn. Any thread.
  IngestStats stats() const;
  LogSinkStats sink_stats() const;

 private:
  class Impl;
  explicit Collector(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  std::filesystem::path socket_path_;
  int tcp_port_ = 0;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_COLLECTOR_H_
