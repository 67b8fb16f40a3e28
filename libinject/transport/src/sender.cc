#include "cuflight/transport/sender.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <utility>

#include "backoff.h"
#include "cuflight/base/scoped_fd.h"
#include "cuflight/schema/ack.h"
#include "cuflight/schema/control.h"
#include "cuflight/transport/peer_trust.h"
#include "line_queue.h"
#include "socket_address.h"

namespace cuflight::transport {
namespace {

using Clock = std::chrono::steady_clock;
using internal::LineQueue;

// Ack lines are at most schema::kMaxAckLineBytes; a line this long without a '\n' is garbage
// and is skipped up to its end.
constexpr size_t kAckBufferBytes = 256;
static_assert(kAckBufferBytes > schema::kMaxAckLineBytes);
// Per Poll(): bounds on reading (a flooding peer cannot hold the owner thread) and on writing
// (the owner gets back to draining its ring at least every few MiB).
constexpr size_t kMaxReadPerPoll = 64 << 10;
constexpr int kMaxWritesPerPoll = 16;
// One sendmsg(2) carries at most this many pieces and bytes; a line needs at most two pieces
// (it may wrap around its ring).
constexpr int kMaxIov = 64;
constexpr size_t kMaxWriteBytes = 256 << 10;
// A TCP connect that has not completed by then is abandoned and retried after the backoff.
constexpr std::chrono::seconds kConnectTimeout{2};
// Window descriptor slots: one per 32 bytes of window (lines are JSON events, hundreds of bytes).
constexpr size_t kWindowBytesPerSlot = 32;

// A counter written by the owner thread only, readable from any thread.
class Counter {
 public:
  void Add(uint64_t n = 1) noexcept {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t Get() const noexcept { return v_.load(std::memory_order_relaxed); }
  void Zero() noexcept { v_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // Linux 5.3, the same number on every architecture
#endif

// A descriptor of this process that tells a collector when it has ended (design point 11): a
// pidfd (pidfd_open(2), Linux 5.3; readable once the process has exited), else its /proc
// directory (opened O_PATH: reads of it fail once the process is gone, Linux 4.18's way);
// -1 when neither can be had. Made anew for each connection, in the process that connects, so
// a fork()ed child passes its own. Async-signal-safe (two system calls).
int OwnLifeFd() noexcept {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));  // close-on-exec
  if (pidfd >= 0) return pidfd;
  return open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

uint64_t SeedFor(const void* self) noexcept {
  return (static_cast<uint64_t>(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(self);
}

}  // namespace

struct Sender::Impl {
  explicit Impl(SenderOptions o) noexcept;
  ~Impl() {
    if (fd >= 0) close(fd);
  }

  // Position of the current connection's stream: the next preamble line and the next window
  // line to write (a window index, design point 3), each with the bytes of it already written
  // (at most one of the two is > 0).
  struct Cursor {
    uint64_t pre = 0;
    size_t pre_off = 0;
    uint64_t win = 0;
    size_t win_off = 0;
  };
  // The line the stream continues with.
  struct Item {
    bool preamble;
    uint64_t index;
    size_t off;
  };

  bool NextItem(const Cursor& c, Item* it) const noexcept;
  static void Step(Cursor* c, const Item& it, size_t take, size_t len) noexcept;
  // The window line at window index `w` that follows, with every one after it up to (not
  // including) the returned index, in `held` and before the next preamble line of `c`: lines
  // that go out back to back from held's storage. Returns w when line w is not in `held`.
  uint64_t HeldRun(const Cursor& c, uint64_t w) const noexcept;
  int BuildIov(iovec* iov, size_t* total) const noexcept;
  void Advance(size_t n) noexcept;
  // Window lines [from, to) (window indices) had their first byte written: counts those written
  // on an earlier connection as retransmitted.
  void NoteBegun(uint64_t from, uint64_t to) noexcept;

  // The window (design point 3): window indices grow by one per line, from win_head (the
  // oldest line not acked or spilled); the oldest lines may be in `aside`, the rest are the
  // front of `held`, up to (not including) held's index `sent`.
  size_t WinLines() const noexcept {
    return aside.lines() + static_cast<size_t>(sent - held.head_index());
  }
  uint64_t WinTail() const noexcept { return win_head + WinLines(); }
  size_t WinBytes() const noexcept { return aside.bytes() + win_held_bytes; }
  // True for window index w (win_head <= w < WinTail()) when its line is in `held`.
  bool InHeld(uint64_t w) const noexcept { return w - win_head >= aside.lines(); }
  uint64_t HeldIndex(uint64_t w) const noexcept {
    return held.head_index() + (w - win_head - aside.lines());
  }
  LineQueue::Line& WinLine(uint64_t w) noexcept {
    return InHeld(w) ? held.at(HeldIndex(w)) : aside.at(aside.head_index() + (w - win_head));
  }
  const LineQueue::Line& WinLine(uint64_t w) const noexcept {
    return InHeld(w) ? held.at(HeldIndex(w)) : aside.at(aside.head_index() + (w - win_head));
  }
  LineQueue::Line& LineOf(const Item& it) noexcept {
    return it.preamble ? preamble.at(it.index) : WinLine(it.index);
  }
  const LineQueue::Line& LineOf(const Item& it) const noexcept {
    return it.preamble ? preamble.at(it.index) : WinLine(it.index);
  }
  LineQueue::Pieces PiecesOf(const Item& it) const noexcept {
    const LineQueue& q = it.preamble ? preamble : InHeld(it.index) ? held : aside;
    return q.BytesOf(LineOf(it), it.off);
  }
  bool WindowAdmits(size_t len) const noexcept {
    return WinLines() < aside.line_capacity() && WinBytes() + len <= max_line;
  }
  // The window's oldest line, acked or spilled, leaves.
  void PopWindowFront() noexcept {
    if (!aside.empty()) {
      aside.PopFront();
    } else {
      win_held_bytes -= held.front().len;
      held.PopFront();
    }
    ++win_head;
  }
  // The oldest never-sent line, dropped or spilled, leaves. Requires the window's lines out of
  // `held` (sent == held.head_index(), MoveAside) and a never-sent line.
  void PopUnsentFront() noexcept {
    held.PopFront();
    sent = held.head_index();
  }
  // Copies the window's lines in `held` to `aside` (design point 3), so that the oldest
  // never-sent line is held's front.
  void MoveAside() noexcept;
  size_t UnsentLines() const noexcept { return static_cast<size_t>(held.tail_index() - sent); }
  size_t UnsentBytes() const noexcept { return held.bytes() - win_held_bytes; }
  size_t HeldBytes() const noexcept { return held.bytes() + aside.bytes(); }

  bool IsDue(Clock::time_point now) const noexcept;
  void StampOldest(Clock::time_point now) noexcept;
  void MoveDue(Clock::time_point now) noexcept;
  void TryConnect(Clock::time_point now) noexcept;
  void RefuseUntrusted(Clock::time_point now) noexcept;
  void CheckConnect(Clock::time_point now) noexcept;
  void OnConnected(Clock::time_point now) noexcept;
  void Disconnect(Clock::time_point now) noexcept;
  void WarnDenied() noexcept;
  void ReadAcks(Clock::time_point now) noexcept;
  void ConsumeAckBytes(size_t n) noexcept;
  void ApplyAck(uint64_t seq) noexcept;
  void ReleaseAcked() noexcept;
  void WriteDue(Clock::time_point now) noexcept;
  bool SpillAllowed() const noexcept {
    return spill_on && fd < 0 && (connect_failed || !addr.valid());
  }
  void SpillDue(Clock::time_point now) noexcept;
  bool SpillLine(const LineQueue& q, uint64_t index) noexcept;
  bool AppendToSpill(const LineQueue& q, uint64_t index) noexcept;
  void ReleaseSpilledPreamble() noexcept;
  Clock::time_point SpillDeadline() const noexcept;
  // A batch is ready when batch_bytes wait, or when the buffer could not take batch_bytes more
  // (a small buffer, or acks lagging): waiting longer would not make the batch bigger.
  bool BatchReady() const noexcept {
    return UnsentBytes() >= opts.batch_bytes || HeldBytes() + opts.batch_bytes > buffer_bytes;
  }
  bool FitsUnsent(size_t len) const noexcept {
    return UnsentLines() < max_unsent_lines && held.Fits(len) && HeldBytes() + len <= buffer_bytes;
  }
  bool Connected() const noexcept { return fd >= 0 && !connecting; }
  // Takes `s` as the socket and remembers its inode for CloseAfterFork.
  void AdoptSocket(int s) noexcept {
    fd = s;
    struct stat st {};
    if (fstat(s, &st) == 0) socket_ino.store(static_cast<uint64_t>(st.st_ino));
  }
  // Closes the socket, with no fork() in between (fork_mu): a child has the socket recorded
  // with its inode, or not at all.
  void CloseSocket() noexcept {
    std::lock_guard<std::mutex> no_fork(fork_mu);
    socket_ino.store(0);
    close(fd);
    fd = -1;
  }
  uint64_t Unacked() const noexcept {
    return aside.lines() + held.lines() + (preamble.lines() - preamble_released);
  }
  void Reset() noexcept;

  SenderOptions opts;
  internal::SocketAddress addr;
  size_t buffer_bytes = 0;
  size_t max_line = 0;
  bool buffers_ok = false;
  size_t max_unsent_lines = 0;
  // Every held line in seq order (design point 3): the window's newest lines (written, at least
  // partly, to some connection, or about to be), then from index `sent` on the lines never
  // written. Lines are encoded into it in place (Reserve/Commit) or copied in (Enqueue).
  LineQueue held;
  uint64_t sent = 0;
  size_t win_held_bytes = 0;  // bytes of held's window lines (below `sent`)
  // The window's oldest lines when a never-sent line had to be dropped behind them (design
  // point 3), in seq order, all older than held's.
  LineQueue aside;
  uint64_t win_head = 0;  // the window index of the window's oldest line
  uint64_t begun_end = 0;  // one past the highest window index any connection began writing
  // The storage the last Reserve() offered: valid while held's tail is still `reserved_tail`.
  bool reserved = false;
  uint64_t reserved_tail = 0;
  size_t reserved_len = 0;
  const char* reserved_at = nullptr;
  LineQueue preamble;  // never popped, so never wraps
  internal::Backoff backoff;

  int fd = -1;
  // The inode of `fd` while it is open (0: none known); seq_cst, read by a fork()ed child.
  std::atomic<uint64_t> socket_ino{0};
  // Held while a socket is created and recorded or closed, and across fork() (BeforeFork to
  // AfterForkInParent), so a fork()ed child finds every socket of this sender recorded
  // (CloseAfterFork). Held only for non-blocking system calls.
  std::mutex fork_mu;
  bool connecting = false;
  Clock::time_point connect_started{};
  Clock::time_point connected_since{};
  Clock::time_point next_connect = Clock::time_point::min();
  bool connect_failed = false;  // the last connect attempt failed (none made yet: false)
  // Unix sockets: whose collector is trusted (peer_trust.h), why the last one was not, and
  // whether that was reported (again only after a trusted connection).
  TrustedUids trusted;
  char untrusted_why[320] = {};
  bool untrusted_warned = false;
  bool denied_warned = false;  // WarnDenied() said it since the last connection
  bool conn_got_ack = false;
  Cursor cur;

  bool has_oldest = false;  // oldest_since is when a Poll() first saw the oldest never-sent line
  Clock::time_point oldest_since{};
  bool force = false;  // Flush() in progress: everything waiting is due

  std::optional<uint64_t> last_seq;     // highest seq given to Enqueue/AddPreamble
  std::optional<uint64_t> max_written;  // highest seq written completely on some connection
  std::optional<uint64_t> acked_seq;    // highest ack applied (clamped to max_written)
  // Preamble lines released (covered by acked_seq, or written to the spill): always a prefix.
  uint64_t preamble_released = 0;

  // Spilling (design point 8).
  bool spill_on = false;    // opts.spill is set and may be used (not after a fork)
  uint64_t spill_file = 0;  // the sink's file the last spilled line went to (0: none yet)
  uint64_t spill_pre = 0;   // the next preamble line that file lacks (<= preamble_released)
  Clock::time_point spill_retry_at = Clock::time_point::min();  // after a refusal

  // Descriptor passing (design point 11): on for Unix addresses with a pass_fd until the kernel
  // refuses it; pending until a send on the current connection carried it.
  bool pass_on = false;
  bool pass_pending = false;

  char ack_buf[kAckBufferBytes];
  size_t ack_len = 0;
  // The latest yield line read and not yet taken (TakeYield).
  std::optional<uint64_t> yield_ms;
  bool ack_discarding = false;  // inside an over-long garbage line

  Counter enqueued, preamble_lines, acked, spilled, spill_refusals, dropped_disconnected,
      dropped_backpressure, rejected_no_room, rejected_too_large, rejected_invalid, retransmitted,
      connects, connect_failures, disconnects, write_errors, partial_writes, bytes_written,
      bytes_read, acks, garbage_lines, untrusted_collector, fds_passed, fd_pass_failures, yields;
};

Sender::Impl::Impl(SenderOptions o) noexcept
    : opts(std::move(o)), backoff(opts.backoff_min, opts.backoff_max, SeedFor(this)) {
  (void)internal::ParseSocketAddress(opts.socket_path, &addr);
  trusted = ProducerTrustedUids(opts.trusted_collector_uid);
  spill_on = opts.spill != nullptr;
  pass_on = opts.pass_fd >= 0 && addr.family() == AF_UNIX;
  buffer_bytes = std::min(opts.buffer_bytes, LineQueue::kMaxByteCapacity);
  max_line = std::clamp<size_t>(opts.window_bytes, 1, std::max<size_t>(buffer_bytes, 1));
  const size_t window_slots =
      std::min(opts.max_lines, std::max<size_t>(1, opts.window_bytes / kWindowBytesPerSlot));
  // Held's slots: the never-sent lines' (max_lines) and the window's, which a window in `held`
  // takes until its lines are acked or moved aside.
  max_unsent_lines = opts.max_lines;
  buffers_ok = buffer_bytes > 0 && aside.Allocate(max_line, window_slots) &&
               held.Allocate(buffer_bytes, max_unsent_lines + aside.line_capacity()) &&
               preamble.Allocate(std::max<size_t>(opts.preamble_bytes, 1),
                                 std::max<size_t>(opts.max_preamble_lines, 1));
}

bool Sender::Impl::NextItem(const Cursor& c, Item* it) const noexcept {
  if (c.pre_off > 0) {
    *it = {true, c.pre, c.pre_off};
    return true;
  }
  if (c.win_off > 0) {
    *it = {false, c.win, c.win_off};
    return true;
  }
  // Window lines an ack already covers (a restarted collector acking what it had stored) are
  // not sent again; they are released once the cursor has passed them.
  uint64_t win = c.win;
  const uint64_t win_tail = WinTail();
  if (acked_seq) {
    while (win < win_tail && WinLine(win).seq <= *acked_seq) ++win;
  }
  const bool have_win = win < win_tail;
  if (c.pre < preamble.tail_index()) {
    // A preamble line goes out only after every held line with a lower seq.
    const uint64_t seq = preamble.at(c.pre).seq;
    bool first = true;
    if (have_win) {
      first = seq < WinLine(win).seq;
    } else if (UnsentLines() > 0) {
      first = seq < held.at(sent).seq;
    }
    if (first) {
      *it = {true, c.pre, 0};
      return true;
    }
  }
  if (have_win) {
    *it = {false, win, 0};
    return true;
  }
  return false;
}

void Sender::Impl::Step(Cursor* c, const Item& it, size_t take, size_t len) noexcept {
  uint64_t& index = it.preamble ? c->pre : c->win;
  size_t& off = it.preamble ? c->pre_off : c->win_off;
  index = it.index;
  off += take;
  if (off == len) {
    ++index;
    off = 0;
  }
}

int Sender::Impl::BuildIov(iovec* iov, size_t* total) const noexcept {
  int n = 0;
  *total = 0;
  Cursor c = cur;
  Item it{};
  while (n + 2 <= kMaxIov && *total < kMaxWriteBytes && NextItem(c, &it)) {
    LineQueue::Pieces pieces;
    const uint64_t run_end = it.preamble ? it.index : HeldRun(c, it.index);
    if (run_end > it.index) {
      // Window lines back to back in held's storage: one or two pieces for all of them, cut
      // at the write's byte budget (a cut line continues in the next write, as after a
      // partial one).
      pieces = held.BytesOf(HeldIndex(it.index), it.off, HeldIndex(run_end - 1));
      const size_t budget = kMaxWriteBytes - *total;
      if (pieces.first.size() >= budget) {
        pieces.first = pieces.first.substr(0, budget);
        pieces.second = {};
      } else if (pieces.first.size() + pieces.second.size() > budget) {
        pieces.second = pieces.second.substr(0, budget - pieces.first.size());
      }
    } else {
      pieces = PiecesOf(it);
    }
    for (std::string_view piece : {pieces.first, pieces.second}) {
      if (piece.empty()) continue;
      if (n > 0 &&
          static_cast<const char*>(iov[n - 1].iov_base) + iov[n - 1].iov_len == piece.data()) {
        iov[n - 1].iov_len += piece.size();  // contiguous with the previous line
      } else {
        iov[n].iov_base = const_cast<char*>(piece.data());
        iov[n].iov_len = piece.size();
        ++n;
      }
      *total += piece.size();
    }
    if (run_end > it.index) {
      c.win = run_end;  // the cut line, if any, is past the budget: the loop ends here
      c.win_off = 0;
    } else {
      const LineQueue::Line& line = LineOf(it);
      Step(&c, it, line.len - it.off, line.len);
    }
  }
  return n;
}

uint64_t Sender::Impl::HeldRun(const Cursor& c, uint64_t w) const noexcept {
  if (!InHeld(w)) return w;
  uint64_t end = WinTail();
  // Line w may be a half-written one an ack covers (finished all the same, point 6); the lines
  // an ack covers after it are skipped (NextItem), so they end the run.
  if (acked_seq && w + 1 < end && held.at(HeldIndex(w + 1)).seq <= *acked_seq) return w + 1;
  if (c.pre < preamble.tail_index()) {
    // Up to the first line above the next preamble line's seq (NextItem's rule); seqs grow
    // along the window, so a binary search.
    const uint64_t pre_seq = preamble.at(c.pre).seq;
    uint64_t lo = w;
    while (lo < end) {
      const uint64_t mid = lo + (end - lo) / 2;
      if (held.at(HeldIndex(mid)).seq < pre_seq) {
        lo = mid + 1;
      } else {
        end = mid;
      }
    }
  }
  return end;
}

void Sender::Impl::NoteBegun(uint64_t from, uint64_t to) noexcept {
  if (to <= from) return;
  // The window is written in order on every connection, so the lines begun before are exactly
  // those below begun_end (lines an ack let a connection skip are released, never written).
  if (begun_end > from) retransmitted.Add(std::min(to, begun_end) - from);
  begun_end = std::max(begun_end, to);
}

void Sender::Impl::Advance(size_t n) noexcept {
  Item it{};
  while (n > 0 && NextItem(cur, &it)) {
    const uint64_t run_end = it.preamble ? it.index : HeldRun(cur, it.index);
    if (run_end > it.index) {
      // The lines BuildIov sent as one run: how many of them the n bytes finish, by a binary
      // search on the count (a run's bytes come from its first and last lines' offsets).
      const uint64_t h = HeldIndex(it.index);
      uint64_t lo = 0;
      uint64_t hi = run_end - it.index;
      while (lo < hi) {
        const uint64_t mid = lo + (hi - lo + 1) / 2;
        if (held.RunBytes(h, h + mid - 1) - it.off <= n) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      size_t off = 0;
      if (lo > 0) {
        n -= held.RunBytes(h, h + lo - 1) - it.off;
        const uint64_t seq = held.at(h + lo - 1).seq;
        if (!max_written || seq > *max_written) max_written = seq;
      }
      const uint64_t w = it.index + lo;
      if (n > 0 && w < run_end) {  // the rest of n is the start of line w, not finished
        off = (lo == 0 ? it.off : 0) + n;
        n = 0;
      }
      NoteBegun(it.off > 0 ? it.index + 1 : it.index, off > 0 ? w + 1 : w);
      cur.win = w;
      cur.win_off = off;
      continue;
    }
    const LineQueue::Line& line = LineOf(it);
    const size_t remaining = line.len - it.off;
    const size_t take = std::min(n, remaining);
    if (!it.preamble && it.off == 0) NoteBegun(it.index, it.index + 1);
    const uint64_t seq = line.seq;
    Step(&cur, it, take, line.len);
    n -= take;
    if (take == remaining && (!max_written || seq > *max_written)) max_written = seq;
  }
}

void Sender::Impl::StampOldest(Clock::time_point now) noexcept {
  if (UnsentLines() == 0) {
    has_oldest = false;
  } else if (!has_oldest) {
    has_oldest = true;
    oldest_since = now;
  }
}

bool Sender::Impl::IsDue(Clock::time_point now) const noexcept {
  return force || BatchReady() || (has_oldest && now - oldest_since >= opts.flush_interval);
}

void Sender::Impl::MoveDue(Clock::time_point now) noexcept {
  StampOldest(now);
  if (UnsentLines() == 0 || !IsDue(now)) return;
  // Into the window where they lie (design point 3): only the boundary moves, past as many
  // lines as the window admits (the rest wait for acks), found by a binary search on the count:
  // a run's bytes come from its first and last lines' offsets.
  const size_t slots = aside.line_capacity();
  if (WinLines() >= slots || WinBytes() >= max_line) return;
  const size_t budget = max_line - WinBytes();
  size_t lo = 0;  // admitted
  size_t hi = std::min(UnsentLines(), slots - WinLines());
  while (lo < hi) {
    const size_t mid = lo + (hi - lo + 1) / 2;
    if (held.RunBytes(sent, sent + mid - 1) <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  if (lo > 0) {
    win_held_bytes += held.RunBytes(sent, sent + lo - 1);
    sent += lo;
  }
  if (UnsentLines() == 0) has_oldest = false;
}

void Sender::Impl::MoveAside() noexcept {
  // Fits: the window is at most aside's capacity in bytes and lines (WindowAdmits).
  while (held.head_index() != sent) {
    const LineQueue::Line& line = held.front();
    const LineQueue::Pieces p = held.BytesOf(line, 0);
    aside.Push(line.seq, p.first, p.second);
    held.PopFront();
  }
  win_held_bytes = 0;
}

void Sender::Impl::TryConnect(Clock::time_point now) noexcept {
  const bool unix_socket = addr.family() == AF_UNIX && opts.verify_unix_peer;
  if (unix_socket) {
    const SocketDirectory dir = CheckSocketDirectory(opts.socket_path.c_str(), trusted,
                                                     untrusted_why, sizeof(untrusted_why));
    if (dir == SocketDirectory::kUntrusted) return RefuseUntrusted(now);
    // kMissing: connect() below fails with ENOENT, an ordinary absent collector.
  }
  bool in_progress = false;
  int s;
  int err;
  {
    // No fork() between creating the socket and recording it: a child left with an unrecorded
    // copy would keep the parent's connection open after the parent ends.
    std::lock_guard<std::mutex> no_fork(fork_mu);
    s = internal::StartConnect(addr, &in_progress);
    err = errno;
    if (s >= 0) AdoptSocket(s);
  }
  if (s < 0) {
    if (err == EACCES && addr.family() == AF_UNIX) WarnDenied();
    connect_failures.Add();
    connect_failed = true;
    next_connect = now + backoff.Next();
    return;
  }
  if (in_progress) {
    connecting = true;
    connect_started = now;
    return;
  }
  // Before a byte is sent: a Unix connect completes at once, so the peer is known now.
  if (unix_socket && !CheckSocketPeer(fd, trusted, untrusted_why, sizeof(untrusted_why))) {
    CloseSocket();
    return RefuseUntrusted(now);
  }
  OnConnected(now);
}

// An untrusted collector counts as an absent one (its events are held or spilled), with one
// warning until a trusted connection succeeds.
void Sender::Impl::RefuseUntrusted(Clock::time_point now) noexcept {
  connect_failures.Add();
  untrusted_collector.Add();
  connect_failed = true;
  next_connect = now + backoff.Next();
  if (!untrusted_warned && opts.warn) {
    untrusted_warned = true;
    char line[sizeof(untrusted_why) + 160];
    const int n = std::snprintf(line, sizeof(line),
                                "not sending to the collector at %s: %s; events are kept (or "
                                "spilled) as if no collector were there",
                                opts.socket_path.c_str(), untrusted_why);
    if (n > 0) opts.warn(std::string_view(line, std::min(sizeof(line) - 1, size_t(n))));
  }
}

// The socket's mode does not let this process connect (another user's collector that did not
// let this user's group in): one warning until a connection succeeds.
void Sender::Impl::WarnDenied() noexcept {
  if (denied_warned || !opts.warn) return;
  denied_warned = true;
  char line[512];  // a Unix socket path is at most 107 bytes
  const int n = std::snprintf(
      line, sizeof(line),
      "cannot connect to the collector at %s: permission denied (uid %u and its groups may not "
      "use the socket; its operator lets a group in with cuflight-collector --socket-group); "
      "events are kept (or spilled) as if no collector were there",
      opts.socket_path.c_str(), static_cast<unsigned>(geteuid()));
  if (n > 0) opts.warn(std::string_view(line, std::min(sizeof(line) - 1, size_t(n))));
}

void Sender::Impl::CheckConnect(Clock::time_point now) noexcept {
  const int err = internal::FinishConnect(fd);
  if (err == 0) {
    connecting = false;
    OnConnected(now);
    return;
  }
  if (err == EINPROGRESS && now - connect_started < kConnectTimeout) return;
  CloseSocket();
  connecting = false;
  connect_failures.Add();
  connect_failed = true;
  next_connect = now + backoff.Next();
}

void Sender::Impl::OnConnected(Clock::time_point now) noexcept {
  connects.Add();
  untrusted_warned = false;
  denied_warned = false;
  connect_failed = false;
  connected_since = now;
  conn_got_ack = false;
  // The stream starts over: preamble first, then the whole window again (merged by seq).
  cur = Cursor{preamble.head_index(), 0, win_head, 0};
  ack_len = 0;
  ack_discarding = false;
  pass_pending = pass_on;
}

void Sender::Impl::Disconnect(Clock::time_point now) noexcept {
  CloseSocket();
  connecting = false;
  disconnects.Add();
  // A connection that worked (acked, or lived a while) is retried at once; one that the peer
  // dropped straight away keeps growing the backoff, so a broken collector is not hammered.
  if (conn_got_ack || now - connected_since >= opts.backoff_max) {
    backoff.Reset();
    next_connect = now;
  } else {
    next_connect = now + backoff.Next();
    // Closed before any ack: a collector that refused this connection (its limits, its full
    // log) took nothing, so until a connection works again it counts as absent: held lines are
    // spilled (point 8) instead of waiting to be dropped for room.
    connect_failed = true;
  }
}

void Sender::Impl::ReadAcks(Clock::time_point now) noexcept {
  size_t total = 0;
  while (total < kMaxReadPerPoll) {
    const ssize_t n = recv(fd, ack_buf + ack_len, kAckBufferBytes - ack_len, MSG_DONTWAIT);
    if (n > 0) {
      bytes_read.Add(static_cast<uint64_t>(n));
      total += static_cast<size_t>(n);
      ConsumeAckBytes(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    Disconnect(now);  // EOF, ECONNRESET, ...
    break;
  }
  ReleaseAcked();
}

void Sender::Impl::ConsumeAckBytes(size_t n) noexcept {
  const size_t end = ack_len + n;
  size_t start = 0;
  for (size_t i = ack_len; i < end; ++i) {
    if (ack_buf[i] != '\n') continue;
    if (ack_discarding) {
      ack_discarding = false;  // the end of an over-long line, already counted
    } else if (const std::optional<uint64_t> seq =
                   schema::ParseAck(std::string_view(ack_buf + start, i + 1 - start))) {
      acks.Add();
      ApplyAck(*seq);
    } else if (const std::optional<uint64_t> for_ms =
                   schema::ParseYield(std::string_view(ack_buf + start, i + 1 - start))) {
      // The owner takes it with TakeYield (design point 12); a newer one replaces an older.
      yield_ms = *for_ms;
      yields.Add();
    } else {
      garbage_lines.Add();
    }
    start = i + 1;
  }
  size_t rest = end - start;
  if (ack_discarding) {
    rest = 0;
  } else if (rest == kAckBufferBytes) {
    garbage_lines.Add();
    ack_discarding = true;
    rest = 0;
  }
  std::memmove(ack_buf, ack_buf + start, rest);
  ack_len = rest;
}

void Sender::Impl::ApplyAck(uint64_t seq) noexcept {
  conn_got_ack = true;
  if (!max_written) return;  // nothing was written: nothing can be stored
  seq = std::min(seq, *max_written);
  if (!acked_seq || seq > *acked_seq) acked_seq = seq;
}

void Sender::Impl::ReleaseAcked() noexcept {
  if (!acked_seq) return;
  // A half-written line is finished first (point 6): it and the lines after it stay.
  const uint64_t limit = Connected() && cur.win_off > 0 ? cur.win : UINT64_MAX;
  while (!aside.empty() && win_head < limit && aside.front().seq <= *acked_seq) {
    aside.PopFront();
    ++win_head;
    acked.Add();
  }
  if (aside.empty()) {
    // Held's window lines an ack covers: a prefix (seqs grow), found by a binary search and
    // released at once.
    uint64_t lo = held.head_index();
    uint64_t hi = sent;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (held.at(mid).seq <= *acked_seq) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    uint64_t n = lo - held.head_index();
    if (limit != UINT64_MAX) n = std::min(n, limit > win_head ? limit - win_head : 0);
    if (n > 0) {
      win_held_bytes -= held.PopFront(static_cast<size_t>(n));
      win_head += n;
      acked.Add(n);
    }
  }
  if (cur.win < win_head) {
    cur.win = win_head;
    cur.win_off = 0;
  }
  while (preamble_released < preamble.lines() && preamble.at(preamble_released).seq <= *acked_seq) {
    ++preamble_released;
    acked.Add();
  }
}

void Sender::Impl::WriteDue(Clock::time_point now) noexcept {
  MoveDue(now);
  for (int round = 0; round < kMaxWritesPerPoll; ++round) {
    iovec iov[kMaxIov];
    size_t total = 0;
    const int n = BuildIov(iov, &total);
    if (n == 0) return;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
    const base::ScopedFd life(pass_pending ? OwnLifeFd() : -1);
    if (pass_pending) {  // the descriptors go with the connection's first bytes
      const int fds[2] = {opts.pass_fd, life.Get()};
      const size_t count = fds[1] >= 0 ? 2 : 1;
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(count * sizeof(int));
      std::memcpy(CMSG_DATA(c), fds, count * sizeof(int));
    }
    const ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (pass_pending && errno != EPIPE && errno != ECONNRESET && errno != ENOTCONN) {
        // The kernel refused the descriptor, not the bytes (EPERM from a security module,
        // ETOOMANYREFS, EBADF, ...): the lines go without it from now on.
        const int err = errno;
        pass_on = false;
        pass_pending = false;
        fd_pass_failures.Add();
        if (opts.warn) {
          char line[256];
          const int len = std::snprintf(
              line, sizeof(line),
              "cannot pass the black box to the collector at %s (%s); events recorded and not "
              "yet sent when the process is killed are lost",
              opts.socket_path.c_str(), std::strerror(err));  // NOLINT(concurrency-mt-unsafe)
          if (len > 0) opts.warn(std::string_view(line, std::min(sizeof(line) - 1, size_t(len))));
        }
        continue;
      }
      write_errors.Add();
      Disconnect(now);
      return;
    }
    if (pass_pending) {
      pass_pending = false;
      fds_passed.Add();
    }
    bytes_written.Add(static_cast<uint64_t>(w));
    Advance(static_cast<size_t>(w));
    ReleaseAcked();  // a line held back because it was half written may be released now
    if (static_cast<size_t>(w) < total) {
      partial_writes.Add();
      return;
    }
  }
}

void Sender::Impl::SpillDue(Clock::time_point now) noexcept {
  if (!SpillAllowed() || now < spill_retry_at) return;
  const bool unsent_due = IsDue(now);
  for (;;) {
    // Window lines (sent on a lost connection) have waited already; never-sent lines go when
    // due, as they would to a collector.
    bool ok = false;
    if (WinLines() > 0) {
      const LineQueue& q = aside.empty() ? held : aside;
      ok = SpillLine(q, q.head_index());
      if (ok) {
        PopWindowFront();
        spilled.Add();
      }
    } else if (unsent_due && UnsentLines() > 0) {
      ok = SpillLine(held, sent);  // held's front: the window is empty
      if (ok) {
        PopUnsentFront();
        spilled.Add();
      }
    } else if (force && preamble_released < preamble.lines()) {
      // Nothing else is held (Flush made every line due): the preamble lines not yet released
      // go alone. Outside Flush they wait for a held line, being kept for the sender's life.
      ok = SpillLine(preamble, preamble.head_index() + preamble_released);
    } else {
      break;
    }
    if (!ok) {
      spill_refusals.Add();
      spill_retry_at = now + opts.flush_interval;
      break;
    }
  }
  if (UnsentLines() == 0) has_oldest = false;
}

bool Sender::Impl::SpillLine(const LineQueue& q, uint64_t index) noexcept {
  const LineQueue::Line& line = q.at(index);
  const uint64_t file = opts.spill->PrepareLine(line.len);
  if (file == 0) return false;
  if (file != spill_file) {  // a new file: it starts with the preamble
    spill_file = file;
    spill_pre = preamble.head_index();
  }
  // The preamble lines below this line's seq go first (the rule of a new connection).
  while (spill_pre < preamble.tail_index() && preamble.at(spill_pre).seq < line.seq) {
    if (!AppendToSpill(preamble, spill_pre)) return false;
    ++spill_pre;
    ReleaseSpilledPreamble();
  }
  if (!AppendToSpill(q, index)) return false;
  if (&q == &preamble) {
    ++spill_pre;
    ReleaseSpilledPreamble();
  }
  return true;
}

bool Sender::Impl::AppendToSpill(const LineQueue& q, uint64_t index) noexcept {
  const LineQueue::Pieces p = q.BytesOf(q.at(index), 0);
  return opts.spill->AppendLine(p.first, p.second);
}

void Sender::Impl::ReleaseSpilledPreamble() noexcept {
  // Every preamble line below spill_pre is in a spill file; count each one once.
  const uint64_t in_file = spill_pre - preamble.head_index();
  if (in_file > preamble_released) {
    spilled.Add(in_file - preamble_released);
    preamble_released = in_file;
  }
}

Clock::time_point Sender::Impl::SpillDeadline() const noexcept {
  constexpr Clock::time_point kNever = Clock::time_point::max();
  if (!SpillAllowed()) return kNever;
  Clock::time_point due = kNever;
  if (WinLines() > 0 || (force && Unacked() > 0)) {
    due = Clock::time_point::min();
  } else if (UnsentLines() > 0) {
    due =
        !has_oldest || BatchReady() ? Clock::time_point::min() : oldest_since + opts.flush_interval;
  }
  return due == kNever ? kNever : std::max(due, spill_retry_at);
}

void Sender::Impl::Reset() noexcept {
  if (fd >= 0) CloseSocket();
  connecting = false;
  held.Clear();
  aside.Clear();
  sent = 0;
  win_held_bytes = 0;
  win_head = 0;
  begun_end = 0;
  reserved = false;
  preamble.Clear();
  cur = Cursor{};
  next_connect = Clock::time_point::min();
  connect_failed = false;
  conn_got_ack = false;
  has_oldest = false;
  force = false;
  last_seq.reset();
  max_written.reset();
  acked_seq.reset();
  preamble_released = 0;
  // The sink's files are the parent's: the child must not write to them (the shared_ptr is not
  // touched, since releasing it is not async-signal-safe).
  spill_on = false;
  // The descriptor is the parent's too.
  pass_on = false;
  pass_pending = false;
  spill_file = 0;
  spill_pre = 0;
  spill_retry_at = Clock::time_point::min();
  ack_len = 0;
  ack_discarding = false;
  yield_ms.reset();
  backoff.Reset();
  backoff.Reseed(SeedFor(this));
  for (Counter* c :
       {&enqueued, &preamble_lines, &acked, &spilled, &spill_refusals, &dropped_disconnected,
        &rejected_no_room, &rejected_too_large, &rejected_invalid, &retransmitted, &connects,
        &connect_failures, &disconnects, &write_errors, &partial_writes, &bytes_written,
        &bytes_read, &acks, &garbage_lines, &untrusted_collector}) {
    c->Zero();
  }
  dropped_backpressure.Zero();
  fds_passed.Zero();
  fd_pass_failures.Zero();
  yields.Zero();
}

Sender::Sender(SenderOptions options) noexcept
    : impl_(new (std::nothrow) Impl(std::move(options))) {}

Sender::~Sender() = default;

bool Sender::AddPreamble(uint64_t seq, std::string_view line) noexcept {
  if (!impl_) return false;
  Impl& s = *impl_;
  if (!s.buffers_ok || line.empty() || line.back() != '\n' || (s.last_seq && seq <= *s.last_seq) ||
      !s.preamble.Fits(line.size())) {
    s.rejected_invalid.Add();
    return false;
  }
  s.preamble.Push(seq, line);
  s.preamble_lines.Add();
  s.last_seq = seq;
  return true;
}

bool Sender::Enqueue(uint64_t seq, std::string_view line) noexcept {
  if (!impl_) return false;
  Impl& s = *impl_;
  s.reserved = false;  // ends any reservation: a line taken goes where it was (point 13)
  if (line.empty() || line.back() != '\n' || (s.last_seq && seq <= *s.last_seq)) {
    s.rejected_invalid.Add();
    return false;
  }
  s.last_seq = seq;
  if (s.buffers_ok && line.size() > s.max_line) {
    s.rejected_too_large.Add();
    return false;
  }
  // Dropping never-sent lines cannot make room taken by the window.
  if (!s.buffers_ok || s.WinBytes() + line.size() > s.buffer_bytes) {
    s.rejected_no_room.Add();
    return false;
  }
  while (!s.FitsUnsent(line.size())) {
    if (s.sent != s.held.head_index()) {
      s.MoveAside();  // the window's lines in front of the oldest never-sent one
      continue;
    }
    s.PopUnsentFront();  // there is one: the window alone leaves room for the line
    (s.Connected() ? s.dropped_backpressure : s.dropped_disconnected).Add();
  }
  if (s.UnsentLines() == 0) s.has_oldest = false;
  s.held.Push(seq, line);
  s.enqueued.Add();
  return true;
}

std::span<char> Sender::Reserve() noexcept {
  if (!impl_ || !impl_->buffers_ok) return {};
  Impl& s = *impl_;
  s.reserved = false;
  if (s.UnsentLines() >= s.max_unsent_lines) return {};
  const std::span<char> back = s.held.Back();
  // What can be taken without dropping anything (HasRoom): the longest line, and the buffer's
  // bound, besides the contiguous storage.
  const size_t room = std::min({back.size(), s.max_line, s.buffer_bytes - s.HeldBytes()});
  if (room == 0) return {};
  s.reserved = true;
  s.reserved_tail = s.held.tail_index();
  s.reserved_len = room;
  s.reserved_at = back.data();
  return back.first(room);
}

bool Sender::Commit(uint64_t seq, size_t n) noexcept {
  if (!impl_) return false;
  Impl& s = *impl_;
  // Reserve() ran and nothing was taken since (held's tail is where it was; Clear resets
  // `reserved`): the storage is still held's back, still free.
  const bool valid = s.buffers_ok && s.reserved && s.reserved_tail == s.held.tail_index() &&
                     n > 0 && n <= s.reserved_len && s.reserved_at[n - 1] == '\n' &&
                     (!s.last_seq || seq > *s.last_seq);
  s.reserved = false;
  if (!valid) {
    s.rejected_invalid.Add();
    return false;
  }
  s.last_seq = seq;
  if (s.UnsentLines() == 0) s.has_oldest = false;
  s.held.PushWritten(seq, n);
  s.enqueued.Add();
  return true;
}

bool Sender::HasRoom(size_t bytes) const noexcept {
  return impl_ && impl_->buffers_ok && bytes <= impl_->max_line && impl_->FitsUnsent(bytes);
}

void Sender::Poll(std::chrono::steady_clock::time_point now) noexcept {
  if (!impl_ || !impl_->buffers_ok) return;
  Impl& s = *impl_;
  s.StampOldest(now);
  if (s.fd < 0) {
    if (s.addr.valid() && now >= s.next_connect) s.TryConnect(now);
    if (s.fd < 0) {
      s.SpillDue(now);
      return;
    }
  }
  if (s.connecting) {
    s.CheckConnect(now);
    if (!s.Connected()) {
      if (s.fd < 0) s.SpillDue(now);
      return;
    }
  }
  s.ReadAcks(now);
  if (s.fd < 0) return;
  s.WriteDue(now);
}

bool Sender::Flush(std::chrono::steady_clock::time_point deadline) noexcept {
  if (!impl_) return true;
  Impl& s = *impl_;
  s.force = true;
  bool all_acked = false;
  for (;;) {
    const Clock::time_point now = Clock::now();
    Poll(now);
    if (s.Unacked() == 0) {
      all_acked = true;
      break;
    }
    if (now >= deadline) break;
    SleepUntilProgress(now, deadline);
  }
  s.force = false;
  return all_acked;
}

bool Sender::WaitForRoom(size_t bytes, std::chrono::steady_clock::time_point deadline) noexcept {
  if (!impl_ || !impl_->buffers_ok) return false;
  for (;;) {
    const Clock::time_point now = Clock::now();
    Poll(now);
    if (HasRoom(bytes) || now >= deadline) return HasRoom(bytes);
    SleepUntilProgress(now, deadline);
  }
}

void Sender::SleepUntilProgress(std::chrono::steady_clock::time_point now,
                                std::chrono::steady_clock::time_point deadline) noexcept {
  const Impl& s = *impl_;
  const Clock::time_point wake = std::min(deadline, NextDeadline());
  int timeout_ms = 1;
  if (wake > now) {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    timeout_ms = static_cast<int>(std::clamp<int64_t>(wait, 1, INT_MAX));
  }
  if (s.fd >= 0) {
    pollfd p{s.fd, static_cast<short>(POLLIN | (WantsWrite() ? POLLOUT : 0)), 0};
    (void)poll(&p, 1, timeout_ms);
  } else {
    (void)poll(nullptr, 0, timeout_ms);
  }
}

std::chrono::steady_clock::time_point Sender::NextDeadline() const noexcept {
  constexpr Clock::time_point kNever = Clock::time_point::max();
  if (!impl_ || !impl_->buffers_ok) return kNever;
  const Impl& s = *impl_;
  if (s.fd < 0) return std::min(s.addr.valid() ? s.next_connect : kNever, s.SpillDeadline());
  if (s.connecting) return s.connect_started + kConnectTimeout;
  if (s.UnsentLines() == 0 || !s.WindowAdmits(s.held.at(s.sent).len)) return kNever;
  if (!s.has_oldest || s.force || s.BatchReady()) {
    return Clock::time_point::min();
  }
  return s.oldest_since + s.opts.flush_interval;
}

bool Sender::WantsWrite() const noexcept {
  if (!impl_ || impl_->fd < 0) return false;
  if (impl_->connecting) return true;
  Impl::Item it{};
  return impl_->NextItem(impl_->cur, &it);
}

uint64_t Sender::unacked_lines() const noexcept { return impl_ ? impl_->Unacked() : 0; }

std::optional<uint64_t> Sender::written_seq() const noexcept {
  return impl_ ? impl_->max_written : std::nullopt;
}

size_t Sender::held_bytes() const noexcept {
  return impl_ ? impl_->HeldBytes() : 0;
}

bool Sender::connected() const noexcept { return impl_ && impl_->Connected(); }

int Sender::fd() const noexcept { return impl_ ? impl_->fd : -1; }

bool Sender::ok() const noexcept { return impl_ && impl_->buffers_ok; }

bool Sender::address_valid() const noexcept { return impl_ && impl_->addr.valid(); }

SenderStats Sender::stats() const noexcept {
  SenderStats out;
  if (!impl_) return out;
  const Impl& s = *impl_;
  out.enqueued = s.enqueued.Get();
  out.preamble_lines = s.preamble_lines.Get();
  out.acked = s.acked.Get();
  out.spilled = s.spilled.Get();
  out.spill_refusals = s.spill_refusals.Get();
  out.dropped_disconnected = s.dropped_disconnected.Get();
  out.dropped_backpressure = s.dropped_backpressure.Get();
  out.rejected_no_room = s.rejected_no_room.Get();
  out.rejected_too_large = s.rejected_too_large.Get();
  out.rejected_invalid = s.rejected_invalid.Get();
  out.retransmitted = s.retransmitted.Get();
  out.connects = s.connects.Get();
  out.connect_failures = s.connect_failures.Get();
  out.disconnects = s.disconnects.Get();
  out.write_errors = s.write_errors.Get();
  out.partial_writes = s.partial_writes.Get();
  out.bytes_written = s.bytes_written.Get();
  out.bytes_read = s.bytes_read.Get();
  out.acks = s.acks.Get();
  out.garbage_lines = s.garbage_lines.Get();
  out.untrusted_collector = s.untrusted_collector.Get();
  out.fds_passed = s.fds_passed.Get();
  out.fd_pass_failures = s.fd_pass_failures.Get();
  out.yields = s.yields.Get();
  return out;
}

std::optional<uint64_t> Sender::TakeYield() noexcept {
  if (!impl_) return std::nullopt;
  std::optional<uint64_t> taken = impl_->yield_ms;
  impl_->yield_ms.reset();
  return taken;
}

void Sender::SetSpillSink(std::shared_ptr<SpillSink> sink) noexcept {
  if (!impl_) return;
  Impl& s = *impl_;
  s.opts.spill = std::move(sink);
  s.spill_on = s.opts.spill != nullptr;
  s.spill_file = 0;
  s.spill_pre = s.preamble.head_index();
  s.spill_retry_at = Clock::time_point::min();
}

void Sender::CloseAfterFork() noexcept {
  if (!impl_) return;
  Impl& s = *impl_;
  const int f = s.fd;
  const uint64_t ino = s.socket_ino.load();
  if (f < 0 || ino == 0) return;
  // The same socket as at connect: never close a number the parent reused for something else.
  struct stat st {};
  if (fstat(f, &st) != 0 || !S_ISSOCK(st.st_mode) || static_cast<uint64_t>(st.st_ino) != ino) {
    return;
  }
  close(f);
  s.fd = -1;
  s.socket_ino.store(0);
}

void Sender::BeforeFork() noexcept {
  if (impl_) impl_->fork_mu.lock();
}

void Sender::AfterForkInParent() noexcept {
  if (impl_) impl_->fork_mu.unlock();
}

void Sender::ResetAfterFork() noexcept {
  if (impl_) impl_->Reset();
}

}  // namespace cuflight::transport
