// The producer side of the wire (docs/protocol.md): newline-delimited events out over a Unix
// stream socket (or TCP), cumulative acks back, every event either acked or counted as dropped.
//
// Design:
//  1. One object, driven by one owner thread (the injector's sender thread, or a test/tool) that
//     calls Poll() with its clock. Nothing blocks except Flush(), which sleeps in poll(2) until
//     its deadline. Every socket is SOCK_NONBLOCK | SOCK_CLOEXEC, every send MSG_NOSIGNAL.
//  2. Memory is allocated once, in the constructor: a byte ring for every held line (`held`,
//     buffer_bytes), a second ring of at most `window_bytes` for window lines moved aside (point
//     3), and fixed storage for the preamble. After that nothing allocates, grows or throws.
//  3. A line is written once, into the held ring (encoded there in place, point 13, or copied
//     by Enqueue), and goes to the socket or the spill from where it lies. The window (lines due
//     or written, at least partly, to some connection, not acked: what a new connection
//     retransmits) is the front of that ring and the lines never sent follow it, so a line enters
//     the window by moving a boundary, not its bytes. "The oldest line never sent" is the first
//     past the boundary: with the window empty, dropping it for room is O(1); otherwise the
//     window's lines in the ring are first copied into the aside ring (each line at most once,
//     and only when a line is dropped), which the window then starts with. Lines in the window
//     are never dropped. buffer_bytes bounds the two rings' lines together.
//  4. Writes are batched: lines wait in the buffer until `batch_bytes` are waiting, or the buffer
//     could not take `batch_bytes` more (a bigger batch cannot come), or the oldest has waited
//     `flush_interval` (measured from the first Poll() that saw it); then everything the window
//     admits goes out with as few sendmsg(2) calls as the socket allows; partial writes resume
//     where they stopped. Retransmissions and preamble lines are not delayed.
//  5. On every connection the stream is the preamble and the held lines merged in seq order:
//     process_start (the lowest seq) is always first, and a preamble line added later (a device
//     seen mid-run) goes out after the held lines with lower seqs, never before them, because
//     the collector drops a line whose seq is not above the highest it stored.
//  6. An ack N releases every held line with seq <= N. N is first clamped to the highest seq
//     this sender has completely written, so a confused peer cannot make it forget unsent lines.
//     A line half written on the current connection is finished before it is released (the
//     stream stays whole), and window lines an ack covers are not written again.
//     Ack lines are parsed with schema::ParseAck from a fixed buffer; a line split across reads
//     is reassembled; anything else is counted as garbage and skipped.
//  7. A write error (EPIPE, ECONNRESET, ...), EOF or a read error closes the connection; the
//     next connection starts over with the preamble and retransmits the whole window. Connect
//     failures (ENOENT, ECONNREFUSED, ...) wait a capped exponential backoff with jitter;
//     a connection that got an ack (or lived longer than backoff_max) resets the backoff.
//  8. Spilling (optional, SenderOptions::spill; docs/spill.md): while there is no connection and
//     the last connect attempt failed (or the address is invalid, or the last connection was
//     closed by the peer before any ack: a collector that refused it), held lines that are due (as
//     in point 4; window lines from a lost connection at once) are written to the spill sink
//     instead of being held, each file starting with the preamble merged by seq as in point 5.
//     A spilled line is released like an acked one and is never sent to a collector; a
//     collector that comes back later gets the lines held from then on, and sees the spilled
//     seqs as a gap. Lines the sink refuses (full, disabled) stay held, and are dropped for room
//     as without a sink; the sink is tried again one flush_interval later.
//  9. Back-pressure: a line dropped for room is counted by what was happening. With a collector
//     connected, its acks did not keep up (dropped_backpressure); without one, nothing could be
//     sent (dropped_disconnected). An owner that would rather wait than drop asks HasRoom()
//     first, and WaitForRoom() sleeps until acks (or the spill) make room.
// 10. Trust (Unix sockets; peer_trust.h): before connecting, the socket's directory must belong
//     to a trusted uid and be safe from others; after connecting and before the first byte, the
//     listening process's uid (SO_PEERCRED) must be trusted. A refused collector is treated as
//     an absent one (held, spilled, dropped and counted as usual) and reported once via `warn`.
//     So is a socket whose mode refuses this process (EACCES: a collector of another user that
//     did not let this user's group in with --socket-group).
// 11. Descriptor passing (Unix sockets; SenderOptions::pass_fd): every connection passes one
//     descriptor (the injected library's black box) with SCM_RIGHTS along with its first bytes,
//     so only a collector that passed the trust checks receives it, and after it, in the same
//     message, a descriptor of the process itself that tells the collector when it has ended
//     (a pidfd, else its /proc directory: docs/protocol.md, "The black box"). A collector with
//     a pid namespace of its own on a kernel before 6.5 (no SO_PEERPIDFD) has no other way to
//     learn it. When the kernel refuses them (a security module, a descriptor limit), the line
//     goes out without them, passing stops for good and `warn` says so once.
// 12. Control (docs/protocol.md, "Yielding CUPTI"): besides acks the collector may send a yield
//     line (cuflight/schema/control.h), read from the same fixed buffer; the latest one not yet
//     taken waits for the owner's TakeYield. Anything else is garbage, as before.
// 13. Encoding in place: Reserve() offers the held ring's free contiguous storage at its back,
//     no more than a line taken now without dropping anything (HasRoom) may use; the owner
//     encodes a line there and Commit(seq, n) takes its first n bytes, which are then the line's
//     only copy. Storage reserved and not committed holds no line: nothing of it is sent,
//     spilled or counted, and the next line is written over it. A reservation outlives Poll,
//     Flush and WaitForRoom (popping lines never moves the ring's back) and ends at the next
//     Reserve, Enqueue, Commit or ResetAfterFork. A line the reservation cannot hold (the ring's
//     end is near, the buffer nearly full, the line long) is encoded elsewhere and given to
//     Enqueue, which copies it, wrapping around the ring, and drops for room as usual.
#ifndef CUFLIGHT_TRANSPORT_SENDER_H_
#define CUFLIGHT_TRANSPORT_SENDER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cuflight/transport/spill_sink.h"

namespace cuflight::transport {

struct SenderOptions {
  // Unix socket path, or "tcp:HOST:PORT" with a numeric host, "[v6]" or "localhost" (no name
  // resolution). An invalid address never connects; lines are still buffered and dropped as
  // for an absent collector (see Sender::address_valid()).
  std::string socket_path;
  // Bound on the bytes of every held line, sent-but-unacked plus never-sent (at most 1 GiB).
  size_t buffer_bytes = 8 << 20;
  // At most this many bytes are sent and not yet acked (clamped to [1, buffer_bytes]). Also the
  // longest line that can be sent.
  size_t window_bytes = 1 << 20;
  // Lines waiting to be sent go out at least this often...
  std::chrono::milliseconds flush_interval{100};
  // ... or as soon as this many bytes are waiting.
  size_t batch_bytes = 64 << 10;
  // Reconnect delay after a failure: doubles from min to max, each drawn from [d/2, d].
  std::chrono::milliseconds backoff_min{10};
  std::chrono::milliseconds backoff_max{1000};
  // Most never-sent lines held at once (descriptor slots, 16 bytes each); a full set of slots
  // is "no room" like full bytes. The window has its own slots, min(max_lines, window_bytes/32),
  // in each of the two rings (design point 3).
  size_t max_lines = 1 << 17;
  // Storage for the preamble lines (process_start and device events), fixed at construction,
  // and the most preamble lines.
  size_t preamble_bytes = 64 << 10;
  size_t max_preamble_lines = 256;
  // Unix socket (design point 9): the collector's directory and uid must be trusted
  // (peer_trust.h): the producer's own uid, root's, or this one (-1: none; CUFLIGHT_COLLECTOR_UID).
  int64_t trusted_collector_uid = -1;
  // False turns those checks off (tests of the transport alone; never the injected library).
  bool verify_unix_peer = true;
  // Receives one line, without a newline, when a collector is refused as untrusted or its
  // socket's mode refuses this process (each again only after a connection); may be empty. Called on the owner thread, from Poll()/Flush();
  // must not throw.
  std::function<void(std::string_view)> warn;
  // Where lines that cannot reach a collector go (design point 8); null (the default): nowhere,
  // they are held up to buffer_bytes and then dropped. Shared: the sender keeps it alive.
  std::shared_ptr<SpillSink> spill;
  // A descriptor to pass with SCM_RIGHTS on every Unix-socket connection (design point 11); -1
  // (the default): none. The caller keeps it open while the sender lives. Never over TCP.
  int pass_fd = -1;
};

// Counters since construction (or ResetAfterFork). Accounting identity, at any time:
//   enqueued + preamble_lines ==
//       acked + spilled + dropped_disconnected + dropped_backpressure + Sender::unacked_lines()
// rejected_* lines were never taken (Enqueue returned false): the caller counts those.
struct SenderStats {
  uint64_t enqueued = 0;              // lines Enqueue() or Commit() took
  uint64_t preamble_lines = 0;        // lines AddPreamble() took
  uint64_t acked = 0;                 // held lines (preamble included) released by an ack
  uint64_t spilled = 0;               // held lines (preamble included) released by being
                                      // written to the spill sink (a preamble line once, however
                                      // many spill files repeat it)
  uint64_t spill_refusals = 0;        // times the spill sink refused a line (full, disabled)
  uint64_t dropped_disconnected = 0;  // taken, never sent, dropped to make room while no
                                      // collector was connected
  uint64_t dropped_backpressure = 0;  // taken, never sent, dropped to make room while a
                                      // collector was connected: it had not acknowledged enough
  uint64_t rejected_no_room = 0;      // Enqueue() false: everything held is sent-unacked
  uint64_t rejected_too_large = 0;    // Enqueue() false: longer than min(window, buffer)
  uint64_t rejected_invalid = 0;      // Enqueue()/AddPreamble()/Commit() false: empty, no
                                      // final '\n', seq not increasing, no preamble space, or
                                      // (Commit) longer than its reservation or none valid
  uint64_t retransmitted = 0;         // lines written again on a later connection
  uint64_t connects = 0;              // connections established
  uint64_t connect_failures = 0;      // attempts that failed (no collector, refused, ...)
  uint64_t disconnects = 0;           // established connections lost
  uint64_t write_errors = 0;          // sends that failed with an error (EPIPE, ECONNRESET, ...)
  uint64_t partial_writes = 0;        // sends that took less than offered
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
  uint64_t acks = 0;           // well-formed ack lines read
  uint64_t garbage_lines = 0;  // other lines read from the peer, ignored
  uint64_t untrusted_collector = 0;  // Unix connects refused before sending (design point 9);
                                     // also counted in connect_failures
  uint64_t fds_passed = 0;           // connections pass_fd went out on (design point 11)
  uint64_t fd_pass_failures = 0;     // sends the kernel refused with the descriptor (then none)
  uint64_t yields = 0;               // yield lines read (design point 12)
};

class Sender {
 public:
  // Allocates every buffer. Never throws: if an allocation fails the sender holds nothing and
  // refuses every line (ok() is false). Does not connect; the first Poll() does.
  explicit Sender(SenderOptions options) noexcept;
  ~Sender();  // closes the socket; unacked lines are lost (see unacked_lines()).
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  // Adds a preamble line (process_start, then one device event per device): sent on every
  // connection and written at the start of every spill file, never dropped, kept for the life of
  // the sender, counted as acked once an ack covers its seq (or as spilled once written to the
  // spill, whichever comes first). `line` is one complete line ending in '\n'; `seq` must be above
  // every seq given so far (preamble or not). Returns false (counted in rejected_invalid) if it is
  // not, or if the preamble storage is full.
  bool AddPreamble(uint64_t seq, std::string_view line) noexcept;

  // Queues one complete line (ending in '\n') with its seq, which must be above every seq given
  // so far. Never blocks. When the line does not fit, the oldest lines never sent are dropped
  // until it does (counted exactly, in dropped_backpressure while a collector is connected, else
  // in dropped_disconnected; their seqs leave a gap the collector sees). Returns false, dropping
  // nothing, when the line cannot be taken: longer than
  // min(window_bytes, buffer_bytes) (rejected_too_large), or not fitting even with every
  // never-sent line dropped because the rest is sent-unacked (rejected_no_room), or malformed
  // (rejected_invalid). The caller counts a false return as its own drop: the seq is used.
  bool Enqueue(uint64_t seq, std::string_view line) noexcept;

  // Encoding in place (design point 13): the storage a line of at most its size can be written
  // into now and then taken by Commit() without dropping anything, the line's only copy. Empty
  // when there is none (no buffers, no free storage at the ring's back, no line slot): the owner
  // then encodes elsewhere and calls Enqueue. Never blocks; ends any earlier reservation.
  std::span<char> Reserve() noexcept;

  // Takes the first `n` bytes of the last Reserve()'s storage, ending in '\n', as the line
  // `seq` (above every seq given so far), as Enqueue would have taken them; nothing is dropped.
  // Returns false, taking nothing and leaving the seq unused, when n is 0 or above the
  // reservation (an encoder that ran out of room wrote no line), the line does not end in '\n',
  // the seq is not increasing, or there is no reservation still valid; each counted in
  // rejected_invalid. Either way the reservation ends.
  bool Commit(uint64_t seq, size_t n) noexcept;

  // True if a line of `bytes` would be taken now without dropping anything: the owner can stop
  // draining its ring instead (so that the ring drops, newest first, rather than this buffer).
  bool HasRoom(size_t bytes) const noexcept;

  // Polls, sleeping in poll(2) as Flush() does, until HasRoom(bytes) or `deadline`; returns
  // HasRoom(bytes). Room comes from acks (or the spill), so this waits on the collector: the
  // owner bounds it (a past deadline polls once and returns).
  bool WaitForRoom(size_t bytes, std::chrono::steady_clock::time_point deadline) noexcept;

  // Does the I/O due at `now` (the owner's steady clock; only this and Flush's clock are used):
  // connects (after the backoff if the last attempt failed), sends the preamble on a new
  // connection, writes what is due and what the socket takes, reads acks, and on a lost
  // connection prepares the retransmission. Never blocks.
  void Poll(std::chrono::steady_clock::time_point now) noexcept;

  // Polls until every held line (preamble included) is acked or spilled, or until `deadline`,
  // sleeping in poll(2) on the socket or until the next reconnect attempt, not spinning. Lines
  // waiting for their batch go out at once. With a spill sink, when a connect attempt fails,
  // everything held (unacked preamble lines too) is spilled at once instead of waiting for a
  // collector. Returns true when everything was acked or spilled (also when nothing is held). Used
  // at exit (deadline now+1s) and by tests; returns within about 1 ms of the deadline.
  bool Flush(std::chrono::steady_clock::time_point deadline) noexcept;

  // When the owner should call Poll() next at the latest if fd() shows nothing: the next
  // reconnect attempt, or when the oldest waiting line is due (to be sent or spilled).
  // steady_clock::time_point::max() when only the socket can make progress (waiting for acks or
  // writability), or a time in the past when a Poll() is needed now.
  std::chrono::steady_clock::time_point NextDeadline() const noexcept;
  // True when the owner should wait for fd() to become writable (POLLOUT): bytes are pending
  // that the socket did not take, or a TCP connect is in progress. Always wait for POLLIN.
  bool WantsWrite() const noexcept;

  // Lines held and not yet acked, preamble included: what would be lost if the process died now.
  uint64_t unacked_lines() const noexcept;
  // The highest seq whose line was written completely to some connection (none yet: nullopt).
  // What a connection's socket took reaches the collector even if this process dies next.
  std::optional<uint64_t> written_seq() const noexcept;
  // Bytes of held lines (sent-unacked plus never-sent; the preamble is not counted).
  size_t held_bytes() const noexcept;
  bool connected() const noexcept;
  // The socket, also while a TCP connect is in progress; -1 when there is none.
  int fd() const noexcept;
  // Buffers allocated (false: every line is refused).
  bool ok() const noexcept;
  // The socket address parsed (false: never connects).
  bool address_valid() const noexcept;

  // A snapshot of the counters. The only member that may be called from any thread (each
  // counter is read atomically; the snapshot as a whole is not).
  SenderStats stats() const noexcept;

  // The for_ms of the latest yield line the collector sent and this call has not returned yet
  // (design point 12); nullopt when none came. Owner thread only, like Poll().
  std::optional<uint64_t> TakeYield() noexcept;

  // Replaces the spill sink (null: none). Owner thread only, like Poll(). The next spilled line
  // starts a file of the new sink with the preamble.
  void SetSpillSink(std::shared_ptr<SpillSink> sink) noexcept;

  // For a fork()ed child: closes the inherited socket (sending nothing, so the parent's stream is
  // untouched) and starts over with no lines, no preamble, zero counters and a fresh backoff,
  // keeping the options and the memory. The spill sink, whose files belong to the parent, is
  // no longer used (it is not released here): the child spills nothing until SetSpillSink gives
  // it its own. Reads none of the old state, so it is safe even if another thread of the parent
  // was inside this object at the fork. Async-signal-safe.
  void ResetAfterFork() noexcept;

  // pthread_atfork's prepare and parent handlers, around a fork() by any thread: while held, the
  // owner thread neither creates nor closes a socket (it waits at most for the non-blocking
  // system calls of one connect or close), so CloseAfterFork in the child finds the socket the
  // parent has. The child never releases it: the parent's sender is not used there.
  void BeforeFork() noexcept;
  void AfterForkInParent() noexcept;

  // For a fork()ed child that leaves this sender to its parent: closes the inherited socket and
  // nothing else (no byte sent, no other state touched), so the parent's connection ends when
  // the parent's copy does. Closes only when the descriptor is still the socket this sender
  // connected (its inode), never a number the parent reused after closing it. Async-signal-safe
  // (fstat(2) and close(2)); safe even if another thread of the parent was inside this object.
  void CloseAfterFork() noexcept;

 private:
  struct Impl;
  // Sleeps in poll(2) on the socket until it is ready, the next deadline of the sender, or
  // `deadline` (at least 1 ms).
  void SleepUntilProgress(std::chrono::steady_clock::time_point now,
                          std::chrono::steady_clock::time_point deadline) noexcept;

  std::unique_ptr<Impl> impl_;
};

}  // namespace cuflight::transport

#endif  // CUFLIGHT_TRANSPORT_SENDER_H_
