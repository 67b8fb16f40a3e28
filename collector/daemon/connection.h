// One producer connection: its socket, who the kernel says is at the other end, the framing
// state, the process it identified as, and its pending acknowledgement.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_CONNECTION_H_
#define CUFLIGHT_COLLECTOR_DAEMON_CONNECTION_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "line_framer.h"
#include "producer_blackbox.h"

namespace cuflight::collector {

struct ProducerProcess;

struct Connection {
  Connection(int fd_in, uint64_t id_in, size_t max_line_bytes)
      : fd(fd_in), id(id_in), framer(max_line_bytes) {}

  int fd = -1;
  uint64_t id = 0;  // unique for the collector's life; also its epoll token
  bool is_unix = false;
  // SO_PEERCRED of a Unix socket peer (valid when is_unix).
  pid_t peer_pid = 0;
  uid_t peer_uid = 0;
  gid_t peer_gid = 0;
  // TCP: random per connection; names the connection's own stream (producer_identity.h).
  std::string tcp_token;
  std::string peer;  // for log lines: "pid 123 uid 1000 gid 1000" or "tcp 127.0.0.1:40000"
  std::chrono::steady_clock::time_point accepted_at;
  std::chrono::steady_clock::time_point last_input;  // the latest read that returned bytes

  LineFramer framer;
  ProducerProcess* process = nullptr;  // set by a valid process_start
  // Set with `process`: the stored lines carry this pid instead of a differing payload pid.
  bool rewrite_pid = false;
  int32_t stored_pid = 0;
  // Set with `process`, for `cuflight yield` (yield_control.h): the pid and pid namespace its
  // process_start claims, and its attribution's job.
  int32_t claimed_pid = 0;
  uint64_t claimed_pid_ns = 0;
  std::string job;

  // Acknowledgements: the latest seq to acknowledge, the latest whose line was handed to the
  // socket, and the unsent rest of a partially written ack line. acks_off: an ack write failed
  // (EPIPE, ECONNRESET: the producer closed or died without reading): no more acks are written,
  // and the connection is still read to its end, every complete line stored.
  uint64_t ack_wanted = 0;
  bool ack_wanted_set = false;
  uint64_t ack_sent = 0;
  bool ack_sent_set = false;
  std::string out_pending;
  bool epollout = false;  // EPOLLOUT is in its epoll interest set
  bool acks_off = false;

  bool dirty = false;  // in the loop turn's list of connections to acknowledge
  // Close at the end of this read: the stream ended (EOF, a read error), or the connection is
  // refused (its log cannot take lines). Never because an ack could not be written.
  bool close_requested = false;

  // The black box the producer passed with its first bytes (Unix sockets only; at most one per
  // connection: a second descriptor is refused).
  std::unique_ptr<ProducerBlackbox> blackbox;
  bool blackbox_offered = false;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_CONNECTION_H_
