#include "collector.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "connection.h"
#include "cuflight/base/clock.h"
#include "cuflight/blackbox/region_reader.h"
#include "cuflight/blackbox/region_source.h"
#include "cuflight/metrics/metrics.h"
#include "cuflight/schema/ack.h"
#include "cuflight/schema/control.h"
#include "line_validator.h"
#include "listen_sockets.h"
#include "log_rate_limiter.h"
#include "pid_rewrite.h"
#include "process_lost.h"
#include "producer_identity.h"
#include "producer_process.h"
#include "yield_control.h"

namespace cuflight::collector {
namespace {

using Clock = std::chrono::steady_clock;

// Epoll tokens below kFirstConnectionId are the collector's own descriptors.
constexpr uint64_t kTokenUnix = 1;
constexpr uint64_t kTokenTcp = 2;
constexpr uint64_t kTokenWake = 3;
constexpr uint64_t kFirstConnectionId = 16;
// A producer's pidfd (its black box waits for its end): this bit and the process's id.
constexpr uint64_t kTokenProducerGone = uint64_t{1} << 62;
// Descriptors one read takes with SCM_RIGHTS: a producer passes two (its black box and its
// descriptor of itself); more are closed as they come, and beyond this many the kernel closes
// them itself (MSG_CTRUNC).
constexpr size_t kMaxPassedFds = 4;
// After a connection with a black box ended without process_end, process_lost waits at least
// this long for the producer's end (its pidfd), so that a producer that is still exiting (the
// socket closes before the process is reaped) has its black box read.
constexpr auto kBlackboxWait = std::chrono::seconds(2);
// A dead producer's black box is read a slice per loop turn (RecoverSlice), between the turns
// that serve the live producers, and each slice's lines are flushed with the turn's. A slice
// looks at 4096 ring slots or journal entries at most, and stops after 256 KiB of lines: a few
// milliseconds of work (six black boxes of 17 MiB of lines each were made, validated and stored
// in 0.8 s on a 2-vCPU VM: about 2 ms a slice), so another producer's ack waits at most that much
// longer, and a slice never comes near --max-pending-bytes.
constexpr blackbox::RegionRecovery::Budget kRecoverySlice{.entries = 4096,
                                                          .bytes = uint64_t{256} << 10};
// What one black box may give, in bytes of lines (the rest is counted lost): twice what a
// producer's default ring and journal (16,384 records each) give with 2 KiB lines (CUTLASS-
// length names). A forged box naming a 30,000-character name from every record stops here.
constexpr uint64_t kMaxRecoveredBytesPerBox = uint64_t{128} << 20;
// The owner TCP connections are counted under for --max-connections-per-uid (they have no uid;
// (uid_t)-1 is no user's: chown(2) uses it for "unchanged").
constexpr uid_t kTcpOwner = static_cast<uid_t>(-1);

// What a producer claims is bounded by what its process could have made (docs/collector.md,
// "Counts a producer cannot inflate"): a seq, and each count it reports, at most
// kMaxEventsPerSecond for every second since the process started, plus kSeqSlack. One process
// launching as fast as it can reaches about 345,000 kernels a second (docs/performance.md,
// launch_storm), two events each (kernel, kernel_time): the bound is more than ten times that.
// kSeqSlack covers hosts whose clocks differ (a start_ns in the future counts as now).
constexpr uint64_t kMaxEventsPerSecond = 10'000'000;
constexpr uint64_t kSeqSlack = uint64_t{1} << 20;
// The longest a process may have run before the collector first saw it, for that bound (a
// start_ns further back counts as this long ago): 30 days at 10^7 events/s is 2.6 * 10^13.
constexpr std::chrono::hours kMaxStreamAgeCredit{24 * 30};

// Periodic work (LogSink::Tick, timeouts, the published stats) runs at least this often.
constexpr auto kTickInterval = std::chrono::milliseconds(100);
// Connections accepted per listener and loop turn, so accepting cannot starve reading.
constexpr int kAcceptsPerTurn = 64;
constexpr int kMaxEpollEvents = 256;
// At shutdown, reads per connection at most (kDrainReadsPerConnection * kReadChunkBytes bytes).
constexpr int kDrainReadsPerConnection = 64;
// Rejected-line log lines: at most this many per reason per window, then a count.
constexpr int kLogBurst = 5;
constexpr auto kLogWindow = std::chrono::seconds(10);
// Slot of the rate limiter for connection-level warnings (limit reached, timeouts).
constexpr int kLogKeyConnection = kRejectReasonSlots;

std::string Errno(int err) { return std::strerror(err); }  // NOLINT(concurrency-mt-unsafe)

std::string MapKey(const ProcessKey& key) {
  std::string k;
  k.reserve(key.hostname.size() + key.exe.size() + key.owner.size() + 72);
  k += key.hostname;
  k += '\0';
  k += key.exe;
  k += '\0';
  k += std::to_string(key.pid);
  k += '\0';
  k += std::to_string(key.start_ns);
  k += '\0';
  k += std::to_string(key.instance_id);
  k += '\0';
  k += key.owner;
  return k;
}

std::string Printable(std::string_view text, size_t max) {
  std::string out;
  for (char c : text.substr(0, max)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7f) ? '?' : c;
  }
  if (text.size() > max) out += "...";
  return out;
}

// A dead producer's black box queued for reading (Collector::Impl::RecoverSlice).
struct PendingRecovery {
  std::string map_key;  // its process
  std::unique_ptr<ProducerBlackbox> box;
  std::unique_ptr<blackbox::FdSource> source;          // made when it reaches the front
  std::unique_ptr<blackbox::RegionRecovery> recovery;  // over source
  uint64_t stored = 0;                                 // events stored from it
  uint64_t refused = 0;                                // made, refused by the log (buffers full)
};

}  // namespace

class Collector::Impl {
 public:
  Impl(const CollectorOptions& options, Metrics* metrics, std::shared_ptr<spdlog::logger> logger)
      : options_(options),
        metrics_(metrics),
        log_(logger ? std::move(logger) : spdlog::default_logger()),
        limiter_(kRejectReasonSlots + 1, kLogBurst, kLogWindow),
        read_buf_(kReadChunkBytes) {}

  ~Impl() {
    for (auto& [id, c] : connections_) close(c->fd);
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
    if (spare_fd_ >= 0) close(spare_fd_);
  }

  bool Start(StartupError* error) {
    // TCP first: a refused address is a bad flag, reported before anything is created.
    ListenError listen_error;
    if (!options_.tcp.host.empty()) {
      tcp_ = TcpListener::Open(options_.tcp, options_.tcp_allow_remote, "--tcp", &listen_error);
      if (tcp_.fd() < 0) {
        *error = {listen_error.bad_value ? 2 : 1, listen_error.line};
        return false;
      }
    }
    unix_ = UnixListener::Open(options_.socket, &listen_error, options_.socket_group);
    if (unix_.fd() < 0) {
      *error = {listen_error.bad_value ? 2 : 1, listen_error.line};
      return false;
    }
    // After the socket: a live collector on it is detected before its log files are touched.
    LogSinkOptions sink_options;
    sink_options.dir = options_.log_dir;
    sink_options.socket_group = options_.socket_group;
    sink_options.rotate_bytes = options_.rotate_bytes;
    sink_options.retain_bytes = options_.retain_bytes;
    sink_options.retain_days = options_.retain_days;
    sink_options.fsync_interval = options_.fsync_interval;
    sink_options.max_pending_bytes = options_.max_pending_bytes;
    sink_options.retention_interval = options_.retention_interval;
    std::string sink_error;
    bool in_use = false;
    sink_ = LogSink::Open(sink_options, &sink_error, &in_use);
    if (!sink_) {
      *error = {1, "--log-dir: " + sink_error, in_use};
      return false;
    }
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    // Held in reserve: when accept(2) fails for lack of descriptors, closing it makes room to
    // accept and close the pending connection, instead of spinning on a ready listener.
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0) {
      *error = {1, "cannot create the event loop: " + Errno(errno)};
      return false;
    }
    if (!Watch(unix_.fd(), kTokenUnix, EPOLLIN) || !Watch(wake_fd_, kTokenWake, EPOLLIN) ||
        (tcp_.fd() >= 0 && !Watch(tcp_.fd(), kTokenTcp, EPOLLIN))) {
      *error = {1, "cannot watch the listeners: " + Errno(errno)};
      return false;
    }
    CheckDescriptorLimit();
    return true;
  }

  int tcp_port() const { return tcp_.fd() >= 0 ? tcp_.port() : 0; }

  void RequestStop() {
    stop_.store(true, std::memory_order_release);
    Wake();
  }
  void RequestReopen() {
    reopen_.store(true, std::memory_order_release);
    Wake();
  }

  IngestStats stats() const {
    std::lock_guard<std::mutex> lock(published_mu_);
    return published_;
  }
  LogSinkStats sink_stats() const {
    std::lock_guard<std::mutex> lock(published_mu_);
    return published_sink_;
  }

  int Run() {
    log_->info("collector listening on {} ({}){}; logs in {}", unix_.path().string(),
               options_.socket_group
                   ? fmt::format("this user, root and group {} (gid {})",
                                 options_.socket_group_name, *options_.socket_group)
                   : std::string("this user and root only"),
               tcp_.fd() >= 0 ? fmt::format(" and tcp port {}", tcp_.port()) : std::string(),
               options_.log_dir.string());
    std::array<epoll_event, kMaxEpollEvents> events{};
    Clock::time_point next_tick = Clock::now();
    int status = 0;
    while (!stop_.load(std::memory_order_acquire)) {
      const auto wait =
          std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - Clock::now()).count();
      // While a black box is being read, the loop does not sleep: a slice per turn.
      const int n = epoll_wait(
          epoll_fd_, events.data(), kMaxEpollEvents,
          recoveries_.empty() ? static_cast<int>(std::clamp<int64_t>(wait, 0, 1000)) : 0);
      if (n < 0 && errno != EINTR) {
        log_->critical("epoll_wait failed: {}", Errno(errno));
        status = 1;
        break;
      }
      for (int i = 0; i < n; ++i) Dispatch(events[static_cast<size_t>(i)]);
      RecoverSlice();
      EndTurn();
      if (reopen_.exchange(false, std::memory_order_acq_rel)) {
        log_->info("reopening the log files");
        sink_->Reopen();
        ++stats_.reopens;
        Publish();
      }
      const Clock::time_point now = Clock::now();
      if (now >= next_tick) {
        Tick(now);
        next_tick = now + kTickInterval;
      }
    }
    Shutdown();
    return status;
  }

 private:
  // ---- descriptors and the loop ----

  bool Watch(int fd, uint64_t token, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = token;
    return epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0;
  }

  void Wake() {
    const uint64_t one = 1;
    // A full eventfd counter means a wake-up is already pending.
    [[maybe_unused]] const ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  }

  // The descriptors the collector may need (docs/collector.md, "Descriptors"): per connection
  // its socket, a black box's memfd and pidfd, its process's log file and, during an fsync
  // round, a duplicate of that (5); per process held without a connection (at most
  // --max-connections, Linger) a black box's two and its log file's two (4); and kFixedFds for
  // the listeners, the epoll set, the wake-up and reserve, the log directory and its lock, a
  // date directory and the files a recovery reads, the worker's queued closes (64), the metrics
  // server's share (20, metrics_server.h) and stdio, with a margin.
  static constexpr rlim_t kFdsPerConnection = 5;
  static constexpr rlim_t kFdsPerHeldProcess = 4;
  static constexpr rlim_t kFixedFds = 256;

  rlim_t WantedDescriptors() const {
    const auto c = static_cast<rlim_t>(options_.max_connections);
    return (kFdsPerConnection + kFdsPerHeldProcess) * c + kFixedFds;
  }

  void CheckDescriptorLimit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    const rlim_t wanted = WantedDescriptors();
    if (limit.rlim_cur >= wanted) return;
    limit.rlim_cur = std::min(wanted, limit.rlim_max);
    setrlimit(RLIMIT_NOFILE, &limit);
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < wanted) {
      log_->warn(
          "descriptor limit {} is below 9 x --max-connections {} + 256 = {}; connections and "
          "black boxes beyond it are refused (counted)",
          limit.rlim_cur, options_.max_connections, wanted);
    }
  }

  void Dispatch(const epoll_event& ev) {
    const uint64_t token = ev.data.u64;
    if (token == kTokenUnix) {
      Accept(unix_.fd(), true);
    } else if (token == kTokenTcp) {
      Accept(tcp_.fd(), false);
    } else if (token == kTokenWake) {
      uint64_t value = 0;
      [[maybe_unused]] const ssize_t ignored = read(wake_fd_, &value, sizeof(value));
    } else if ((token & kTokenProducerGone) != 0) {
      OnProducerGone(token & ~kTokenProducerGone);
    } else {
      auto it = connections_.find(token);
      if (it == connections_.end()) return;  // closed earlier in this turn
      Connection& c = *it->second;
      if ((ev.events & EPOLLOUT) != 0) TrySendAck(c);
      if ((ev.events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) ReadOnce(c);
      if (c.close_requested) CloseConnection(token);
    }
  }

  void Accept(int listen_fd, bool is_unix) {
    for (int i = 0; i < kAcceptsPerTurn; ++i) {
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
          close(spare_fd_);
          const int victim = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
          if (victim >= 0) close(victim);
          spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
          RefuseConnection("connection_limit", "out of file descriptors");
          continue;
        }
        log_->error("accept failed: {}", Errno(errno));
        return;
      }
      // The first line (process_start) may be longer than --max-line-bytes: a producer never
      // sends one longer than kMaxProcessStartBytes, and without it the process is lost.
      auto conn = std::make_unique<Connection>(
          fd, next_connection_id_++,
          std::max(options_.max_line_bytes, schema::kMaxProcessStartBytes - 1));
      conn->is_unix = is_unix;
      conn->accepted_at = Clock::now();
      if (is_unix) {
        ucred cred{};
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
          log_->error("SO_PEERCRED failed: {}; closing the connection", Errno(errno));
          close(fd);
          continue;
        }
        conn->peer_pid = cred.pid;
        conn->peer_uid = cred.uid;
        conn->peer_gid = cred.gid;
        if (!PeerAllowed(fd, cred)) {
          close(fd);
          continue;
        }
        if (!TakeOwnerSlot(cred.uid)) {
          close(fd);
          continue;
        }
        conn->peer = fmt::format("pid {} uid {} gid {}", cred.pid, cred.uid, cred.gid);
      } else {
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        sockaddr_storage addr{};
        socklen_t len = sizeof(addr);
        char host[64] = "?";
        int port = 0;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
          if (addr.ss_family == AF_INET) {
            const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
            inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
            port = ntohs(in->sin_port);
          } else if (addr.ss_family == AF_INET6) {
            const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
            port = ntohs(in6->sin6_port);
          }
        }
        conn->peer = fmt::format("tcp {}:{}", host, port);
        if (!TakeOwnerSlot(kTcpOwner)) {
          close(fd);
          continue;
        }
        conn->tcp_token = NewConnectionToken();
      }
      conn->last_input = conn->accepted_at;
      if (!Watch(fd, conn->id, EPOLLIN)) {
        log_->error("cannot watch a connection: {}", Errno(errno));
        ReleaseOwnerSlot(*conn);
        close(fd);
        continue;
      }
      ++stats_.connections_accepted;
      if (metrics_ != nullptr) metrics_->ProducerConnected();
      log_->debug("connection {} from {}", conn->id, conn->peer);
      connections_.emplace(conn->id, std::move(conn));
    }
  }

  // Whether a Unix peer may connect: the collector's user, root, or (with --socket-group) a
  // process with that group as its gid or a supplementary group (SO_PEERGROUPS, the groups it
  // had at connect(2)). The socket's mode already keeps others out; this holds when the file's
  // mode or its directory was loosened by hand. A refused peer is counted and logged, not served.
  bool PeerAllowed(int fd, const ucred& cred) {
    if (cred.uid == geteuid() || cred.uid == 0) return true;
    if (options_.socket_group &&
        (cred.gid == *options_.socket_group || PeerHasGroup(fd, *options_.socket_group))) {
      return true;
    }
    ++stats_.peer_refusals;
    RefuseConnection(
        "peer_not_allowed",
        fmt::format("pid {} uid {} gid {} may not connect: only uid {} (this collector's user) "
                    "and root{}",
                    cred.pid, cred.uid, cred.gid, geteuid(),
                    options_.socket_group
                        ? fmt::format(" and members of group {} (gid {}, --socket-group) may",
                                      options_.socket_group_name, *options_.socket_group)
                        : std::string(" may; let a group's members in with --socket-group")));
    return false;
  }

  // Whether `group` is among the peer's supplementary groups. False when the kernel cannot say
  // (SO_PEERGROUPS needs Linux 4.13).
  bool PeerHasGroup(int fd, gid_t group) {
    std::vector<gid_t> groups(64);
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
      if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
        groups.resize(len / sizeof(gid_t));
        return std::find(groups.begin(), groups.end(), group) != groups.end();
      }
      if (errno != ERANGE) {
        log_->warn("SO_PEERGROUPS failed: {}; only the peer's gid is compared with --socket-group",
                   Errno(errno));
        return false;
      }
      groups.resize(len / sizeof(gid_t) + 1);  // ERANGE: len is the size needed
    }
    return false;
  }

  // Counts one more connection of `owner` (a uid, or kTcpOwner) unless its share is taken: then
  // refuses it (counted) and returns false.
  // The share of one owner (a uid, or kTcpOwner): connections, and also processes held for
  // their grace (Linger).
  int PerOwnerLimit() const {
    return options_.max_connections_per_uid > 0 ? options_.max_connections_per_uid
                                                : std::max(1, options_.max_connections / 4);
  }

  // Counts one more connection of `owner` unless its share is taken, or every slot is and no
  // owner holds two more than it (MakeRoomFor): then refuses it (counted) and returns false.
  bool TakeOwnerSlot(uid_t owner) {
    const int limit = PerOwnerLimit();
    int& count = owner_connections_[owner];
    if (count < limit && connections_.size() >= static_cast<size_t>(options_.max_connections) &&
        !MakeRoomFor(owner, count)) {
      if (count == 0) owner_connections_.erase(owner);
      RefuseConnection(
          "connection_limit",
          fmt::format("--max-connections {} reached, and no user holds two more than {} ({})",
                      options_.max_connections, OwnerName(owner), count));
      return false;
    }
    if (count >= limit) {
      ++stats_.uid_limit_refusals;
      RefuseConnection("uid_connection_limit",
                       fmt::format("{} already holds {} connections (--max-connections-per-uid)",
                                   owner == kTcpOwner ? std::string("tcp (all peers together)")
                                                      : fmt::format("uid {}", owner),
                                   count));
      if (count == 0) owner_connections_.erase(owner);
      return false;
    }
    ++count;
    return true;
  }

  static std::string OwnerName(uid_t owner) {
    return owner == kTcpOwner ? std::string("tcp (all peers together)")
                              : fmt::format("uid {}", owner);
  }

  // Fair shares when every slot is taken (docs/collector.md, "Connection slots"): an owner holding
  // `count` connections gets one by closing the newest connection of the owner holding the most,
  // if that one holds at least count + 2. So colluding users can keep out no one with fewer
  // connections than each of them minus one: with n owners each gets min(share, C / n) at
  // least. The closed producer keeps its events and reconnects (or spills) like after any
  // disconnect. Returns whether a connection was closed.
  bool MakeRoomFor(uid_t owner, int count) {
    uid_t richest = owner;
    int most = 0;
    for (const auto& [who, n] : owner_connections_) {
      if (n > most) {
        most = n;
        richest = who;
      }
    }
    if (richest == owner || most < count + 2) return false;
    uint64_t victim = 0;
    for (const auto& [id, c] : connections_) {
      if ((c->is_unix ? c->peer_uid : kTcpOwner) == richest && id > victim) victim = id;
    }
    if (victim == 0) return false;
    ++stats_.fair_share_closes;
    if (metrics_ != nullptr) metrics_->ConnectionClosed("fair_share");
    uint64_t suppressed = 0;
    if (limiter_.Allow(kLogKeyConnection, Clock::now(), &suppressed)) {
      log_->warn(
          "connection {} ({}) closed to make room for {} ({} connections): --max-connections {} "
          "reached and {} holds {}; the producer reconnects{}",
          victim, connections_.at(victim)->peer, OwnerName(owner), count, options_.max_connections,
          OwnerName(richest), most,
          suppressed > 0 ? fmt::format(" ({} similar messages suppressed)", suppressed)
                         : std::string());
    }
    CloseConnection(victim);
    return true;
  }

  void ReleaseOwnerSlot(const Connection& c) {
    const auto it = owner_connections_.find(c.is_unix ? c.peer_uid : kTcpOwner);
    if (it == owner_connections_.end()) return;
    if (--it->second <= 0) owner_connections_.erase(it);
  }

  void RefuseConnection(std::string_view reason, const std::string& why) {
    ++stats_.connections_refused;
    if (metrics_ != nullptr) metrics_->ConnectionRefused(reason);
    uint64_t suppressed = 0;
    if (limiter_.Allow(kLogKeyConnection, Clock::now(), &suppressed)) {
      log_->warn("refused a connection: {}{}", why,
                 suppressed > 0 ? fmt::format(" ({} similar messages suppressed)", suppressed)
                                : std::string());
    }
  }

  // One read of up to kReadChunkBytes; the lines in it are handled before returning.
  void ReadOnce(Connection& c) {
    const ssize_t n =
        c.is_unix ? ReceiveUnix(c) : recv(c.fd, read_buf_.data(), read_buf_.size(), 0);
    if (n > 0) {
      stats_.bytes_received += static_cast<uint64_t>(n);
      c.last_input = Clock::now();
      Feed(c, std::string_view(read_buf_.data(), static_cast<size_t>(n)));
      return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n < 0 && errno != ECONNRESET) {
      log_->debug("connection {} ({}): read failed: {}", c.id, c.peer, Errno(errno));
    }
    c.close_requested = true;
  }

  // recvmsg(2) on a Unix connection: the bytes into read_buf_, and a descriptor the producer
  // passed (its black box) to TakeBlackbox.
  ssize_t ReceiveUnix(Connection& c) {
    iovec iov{read_buf_.data(), read_buf_.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(kMaxPassedFds * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(c.fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) return n;
    if ((msg.msg_flags & MSG_CTRUNC) != 0) BlackboxRefused(c, "too_many_descriptors", "");
    for (cmsghdr* h = CMSG_FIRSTHDR(&msg); h != nullptr; h = CMSG_NXTHDR(&msg, h)) {
      if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      std::array<int, kMaxPassedFds> fds{};
      for (size_t i = 0; i < count && i < fds.size(); ++i) {
        std::memcpy(&fds[i], CMSG_DATA(h) + i * sizeof(int), sizeof(int));
      }
      TakeBlackbox(c, std::span<const int>(fds.data(), std::min(count, fds.size())));
    }
    return n;
  }

  // Descriptors passed on `c` in one message: the first message's first is the producer's black
  // box, if it checks out, and its second the producer's own descriptor of itself, for learning
  // its end (producer_blackbox.h); any other is closed, counted and logged.
  void TakeBlackbox(Connection& c, std::span<const int> fds) {
    size_t used = 0;
    if (!c.blackbox_offered && !fds.empty()) {
      c.blackbox_offered = true;
      used = std::min<size_t>(fds.size(), 2);
      std::string_view reason;
      std::string why;
      c.blackbox = ProducerBlackbox::Adopt(fds[0], used == 2 ? fds[1] : -1, c.fd, c.peer_pid,
                                           options_.producer_end_sources, &reason, &why);
      if (c.blackbox == nullptr) {
        BlackboxRefused(c, reason, why);
      } else {
        ++stats_.blackboxes_received;
        log_->debug("connection {} ({}): black box of {} bytes, its end from {}", c.id, c.peer,
                    c.blackbox->size(), c.blackbox->end_source());
      }
    }
    for (size_t i = used; i < fds.size(); ++i) {
      close(fds[i]);
      BlackboxRefused(c, "second_descriptor", "a connection passes one black box");
    }
  }

  void BlackboxRefused(const Connection& c, std::string_view reason, const std::string& why) {
    ++stats_.blackbox_errors;
    if (metrics_ != nullptr) metrics_->BlackboxError(reason);
    uint64_t suppressed = 0;
    if (limiter_.Allow(kLogKeyConnection, Clock::now(), &suppressed)) {
      log_->warn(
          "connection {} ({}): black box refused ({}){}{}; a kill of it loses what it had "
          "not sent{}",
          c.id, c.peer, reason, why.empty() ? "" : ": ", Printable(why, 240),
          suppressed > 0 ? fmt::format(" ({} similar messages suppressed)", suppressed)
                         : std::string());
    }
  }

  void Feed(Connection& c, std::string_view chunk) {
    c.framer.Feed(
        chunk, [this, &c](std::string_view line) { HandleLine(c, line); },
        [this, &c]() {
          ++stats_.lines_received;
          Reject(c, RejectReason::kLineTooLong,
                 fmt::format("line longer than {} bytes discarded", options_.max_line_bytes));
        });
    FlushMetrics();
  }

  // ---- the metrics of a read, added once (design point 10) ----

  // The counts held for the read being handled: the run of launches of one configuration, and
  // the lines received and stored by type. Called at the end of each read, before the turn's
  // acks and stats, and before any line other than a launch counts (HandleLine).
  void FlushMetrics() {
    if (metrics_ == nullptr) return;
    FlushLaunchRun();
    for (size_t t = 0; t < tally_received_.size(); ++t) {
      const auto type = static_cast<schema::EventType>(t);
      if (tally_received_[t] != 0) metrics_->EventReceived(type, tally_received_[t]);
      if (tally_stored_[t] != 0) metrics_->EventStored(type, tally_stored_[t]);
    }
    tally_received_.fill(0);
    tally_stored_.fill(0);
  }

  // The launches of the current run, counted (Metrics::Launches: their occupancy sums take the
  // same additions in the same order as one Kernel call per launch would).
  void FlushLaunchRun() {
    if (run_.launches == 0) return;
    const ProducerProcess::InternedConfig& config = *run_.config;
    metrics_->Launches(run_.process->id, *config.labels, config.device, config.occupancy,
                       run_.launches);
    run_ = {};
  }

  // The metrics' state of a process that has gone (Metrics::ProcessGone), after its launches
  // held are counted.
  void ForgetProcessMetrics(uint64_t process_id) {
    FlushLaunchRun();
    metrics_->ProcessGone(process_id);
  }

  // A tally's index: the type's, or the last (Metrics counts it as "other").
  static size_t TypeIndex(schema::EventType type) {
    return std::min(static_cast<size_t>(type), static_cast<size_t>(schema::kEventTypeCount));
  }

  // ---- lines ----

  void HandleLine(Connection& c, std::string_view line) {
    if (c.process == nullptr && LooksLikeYieldRequest(line)) {
      HandleYieldRequest(c, line);
      return;
    }
    ++stats_.lines_received;
    if (c.close_requested) {
      // The connection is being closed because its log refused a line: the rest of this read is
      // not stored either, and counted (the producer keeps and resends them).
      Reject(c, RejectReason::kStoreFailed, "the log is not accepting lines");
      return;
    }
    const schema::Reason verdict = ValidateLine(line, &facts_, metrics_ != nullptr);
    if (verdict != schema::Reason::kOk) {
      if (facts_.header && c.process != nullptr) AccountSeq(*c.process, facts_.header->seq);
      Reject(c, FromSchemaReason(verdict), facts_.message);
      return;
    }
    // Only a launch continues the run of launches held (FlushMetrics): any other line's counts,
    // and the process and GPU changes it may bring, come after the run's.
    if (facts_.type != schema::EventType::kLaunch) FlushLaunchRun();
    // A launch's configuration, found once for the line (the check below, Redescribe,
    // OnStored); null when the process did not describe it (refused below, unknown_config).
    launch_ = facts_.type == schema::EventType::kLaunch && c.process != nullptr
                  ? c.process->Interned(facts_.config)
                  : nullptr;
    if (metrics_ != nullptr && c.process != nullptr && c.process->metrics_join &&
        !(facts_.type != schema::EventType::kKernelTime && facts_.untimed) &&
        (facts_.type == schema::EventType::kKernel ||
         facts_.type == schema::EventType::kKernelTime || launch_ != nullptr)) {
      // The join probe in OnStored misses the cache; storing the line first hides most of it.
      metrics_->PrefetchJoin(c.process->id, facts_.correlation_id,
                             launch_ != nullptr ? launch_->device : facts_.device,
                             facts_.graph_node_id);
    }
    if (facts_.type == schema::EventType::kProcessLost) {
      if (c.process != nullptr) AccountSeq(*c.process, facts_.header->seq);
      Reject(c, RejectReason::kReservedType, "process_lost is written by the collector only");
      return;
    }
    ++stats_.lines_valid;
    const schema::Header& header = *facts_.header;
    if (c.process == nullptr) {
      if (facts_.type != schema::EventType::kProcessStart) {
        Reject(c, RejectReason::kNoProcessStart,
               fmt::format("{} event (seq {}) before the connection's process_start",
                           schema::EventTypeName(facts_.type), header.seq));
        return;
      }
      if (!Identify(c, header)) return;
      c.claimed_pid = header.pid;
      c.claimed_pid_ns = facts_.pid_ns;
      c.job = !facts_.workload.hpc_job.empty() ? std::string(facts_.workload.hpc_job)
                                               : JobOfProcessStart(line);
    } else if (facts_.type == schema::EventType::kProcessStart &&
               MapKey(Resolve(c, header).key) != c.process->map_key) {
      AccountSeq(*c.process, header.seq);
      Reject(c, RejectReason::kIdentityChanged,
             "process_start naming another process on an identified connection");
      return;
    }
    ProducerProcess& p = *c.process;
    ++tally_received_[TypeIndex(facts_.type)];
    // Before the duplicate check: after a collector restart the producer's process_start and
    // device events come again as duplicates, and the metrics need them to label its series.
    NoteIdentity(p);
    const uint64_t seq = header.seq;
    // Interned configurations, before the duplicate check too: a producer resends its
    // descriptions with its preamble on every connection (and this collector may have restarted
    // since it stored them), and its launches need them.
    if (facts_.type == schema::EventType::kKernelConfig && !Describe(c, p, line, seq)) return;
    if (facts_.type == schema::EventType::kLaunch && launch_ == nullptr) {
      UnknownConfig(c, p, seq);
      return;
    }
    if (seq > p.next_expected && !Plausible(p, seq, "events_lost")) {
      Reject(c, RejectReason::kImplausibleSeq,
             fmt::format("seq {} is more than the process could have made by now ({} at most)", seq,
                         SeqBound(p)));
      return;
    }
    MarkForAck(c);
    if (p.highest_stored && seq <= *p.highest_stored) {
      ++stats_.duplicates;
      if (metrics_ != nullptr) metrics_->Rejected("duplicate");
      return;
    }
    std::string_view stored_line = line;
    if (c.rewrite_pid && header.pid != c.stored_pid) {
      if (RewritePid(line, c.stored_pid, &rewrite_buf_)) stored_line = rewrite_buf_;
      ++stats_.pid_mismatch;
    }
    if (p.baseline_pending && facts_.type != schema::EventType::kProcessStart &&
        facts_.type != schema::EventType::kDevice &&
        facts_.type != schema::EventType::kKernelConfig) {
      // The first event after the preamble on a per-connection stream: what came before it
      // went to this producer's earlier streams, or was counted by the producer as dropped.
      p.baseline_pending = false;
      p.next_expected = std::max(p.next_expected, seq);
    }
    if (launch_ != nullptr) Redescribe(p, *launch_);
    if (!sink_->Append(p.stream, seq, stored_line)) {
      if (sink_->refusing(p.stream)) {
        // The log's buffers are full (e.g. the disk is): this line and the rest of the
        // connection are not stored; the producer resends them after reconnecting.
        if (!p.highest_refused || seq > *p.highest_refused) p.highest_refused = seq;
        Reject(c, RejectReason::kStoreFailed, "the log is not accepting lines (buffers full)");
        c.close_requested = true;
        return;
      }
      ++stats_.duplicates;
      if (metrics_ != nullptr) metrics_->Rejected("duplicate");
      return;
    }
    if (facts_.type == schema::EventType::kKernelConfig) {
      const auto& config = std::get<schema::OwnedKernelConfigEvent>(facts_.event);
      if (ProducerProcess::InternedConfig* stored = p.Interned(config.config)) {
        stored->line.assign(stored_line);
        stored->file_serial = sink_->file_serial(p.stream);
      }
    }
    AccountSeq(p, seq);
    p.highest_stored = seq;
    ++p.stored;
    ++stats_.lines_stored;
    appended_ = true;
    ++tally_stored_[TypeIndex(facts_.type)];
    OnStored(p);
  }

  // `cuflight yield` (yield_control.h): forwards the yield line to every live producer the
  // request names and the requester may ask, answers with one line and closes.
  void HandleYieldRequest(Connection& c, std::string_view line) {
    if (c.close_requested) return;  // one request per connection: the rest is not read
    ++stats_.yield_requests;
    c.close_requested = true;
    YieldRequest request;
    std::string error;
    std::vector<YieldTarget> targets;
    if (!c.is_unix) {
      error = "yield requests are taken on the collector's Unix socket only";
    } else if (!ParseYieldRequest(line, &request, &error)) {
      error = "bad yield request: " + error;
    } else {
      std::array<char, schema::kMaxYieldLineBytes> buf{};
      const size_t len = schema::EncodeYield(request.for_ms, buf.data(), buf.size());
      for (auto& [id, other] : connections_) {
        Connection& p = *other;
        if (p.process == nullptr || p.process->ended || &p == &c) continue;
        const bool match = request.pid != 0
                               ? p.claimed_pid == request.pid &&
                                     (request.pid_ns == 0 || p.claimed_pid_ns == 0 ||
                                      p.claimed_pid_ns == request.pid_ns)
                               : p.job == request.job;
        if (!match) continue;
        YieldTarget t;
        t.pid = p.claimed_pid;
        t.exe = p.process->key.exe;
        t.uid = p.peer_uid;
        if (!MayYield(c.peer_uid, p.is_unix, p.peer_uid)) {
          t.why = p.is_unix ? "another user's process (only root or its own user may ask)"
                            : "a TCP producer (only root may ask)";
        } else if (p.acks_off || len == 0) {
          t.why = "its connection is closing";
        } else {
          p.out_pending.append(buf.data(), len);
          TrySendAck(p);
          t.asked = true;
        }
        targets.push_back(std::move(t));
      }
    }
    const auto asked = static_cast<uint64_t>(std::count_if(
        targets.begin(), targets.end(), [](const YieldTarget& t) { return t.asked; }));
    stats_.yield_refused += targets.size() - asked;
    const std::string reply = EncodeYieldReply(targets, error);
    // One short line on a fresh connection: the socket's buffer takes it whole.
    [[maybe_unused]] const ssize_t sent =
        send(c.fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    log_->info("yield request from {}: {}", c.peer,
               !error.empty() ? error
                              : fmt::format("{} for {} ms: {} matched, {} asked, {} refused",
                                            request.pid != 0
                                                ? fmt::format("pid {}", request.pid)
                                                : "job " + Printable(request.job, 80),
                                            request.for_ms, targets.size(), asked,
                                            targets.size() - asked));
  }

  // A kernel_config line (docs/protocol.md, "Interned configurations"): remembered, or refused
  // by name (config_redefined, config_flood; the seq is accounted for). The same description
  // again is accepted (and stored unless it is a duplicate). False: refused.
  bool Describe(Connection& c, ProducerProcess& p, std::string_view line, uint64_t seq) {
    const auto& config = std::get<schema::OwnedKernelConfigEvent>(facts_.event);
    schema::ExpandVerdict verdict;
    try {
      verdict = p.configs.Describe(config);
    } catch (const std::bad_alloc&) {
      verdict = schema::ExpandVerdict::kConfigFlood;
    }
    if (verdict == schema::ExpandVerdict::kDescribed) {
      if (p.Interned(config.config) == nullptr) {
        // Known before it is stored (a duplicate after a restart of this collector): its text
        // is what a later file repeats. file_serial 0 names no file.
        std::string_view text = line;
        if (c.rewrite_pid && config.header.pid != c.stored_pid &&
            RewritePid(line, c.stored_pid, &rewrite_buf_)) {
          text = rewrite_buf_;
        }
        // What its launches count, from the description the expander keeps for the process's
        // life (the name a view into it).
        ProducerProcess::InternedConfig& interned = p.interned[config.config];
        interned.line.assign(text);
        if (const schema::OwnedKernelConfigEvent* kept = p.configs.Find(config.config)) {
          interned.name = kept->demangled.empty() ? kept->name : kept->demangled;
          interned.limiting_resource = kept->occupancy.limiting_resource;
          interned.occupancy = kept->occupancy.occupancy;
          interned.device = kept->device;
        }
      }
      return true;
    }
    AccountSeq(p, seq);
    const bool flood = verdict == schema::ExpandVerdict::kConfigFlood;
    Reject(c, flood ? RejectReason::kConfigFlood : RejectReason::kConfigRedefined,
           flood ? fmt::format("kernel_config {} (seq {}): the process described {} "
                               "configurations already, the most one process may",
                               config.config, seq, p.configs.size())
                 : fmt::format("kernel_config {} (seq {}) describes another configuration "
                               "under an id already described",
                               config.config, seq));
    return false;
  }

  // A launch line naming a configuration the process did not describe: refused by name
  // (unknown_config; the seq is accounted for).
  void UnknownConfig(Connection& c, ProducerProcess& p, uint64_t seq) {
    AccountSeq(p, seq);
    Reject(c, RejectReason::kUnknownConfig,
           fmt::format("launch (seq {}) names kernel_config {}, which the process did not "
                       "describe",
                       seq, facts_.config));
  }

  // Before a launch is stored: its configuration's description, again, when the file the launch
  // goes to does not hold it yet (a new segment, a reopened file, this collector's first file
  // of the stream), so that every file is readable alone. A copy with its own seq, appended as
  // the collector's own lines are (the stream's highest seq unchanged).
  void Redescribe(ProducerProcess& p, ProducerProcess::InternedConfig& config) {
    const uint64_t serial = sink_->file_serial(p.stream);
    if (config.file_serial == serial) return;
    sink_->AppendCollectorEvent(p.stream, config.line);
    config.file_serial = serial;
  }

  // Who the process and its GPUs are, for the metrics' labels (Metrics::Process, Device), from a
  // process_start or device line.
  void NoteIdentity(ProducerProcess& p) {
    if (metrics_ == nullptr) return;
    if (facts_.type == schema::EventType::kProcessStart) {
      metrics_->Process(p.id, facts_.workload, facts_.timing);
      p.metrics_join = metrics_->RemembersLaunches(p.id);
    } else if (facts_.type == schema::EventType::kDevice) {
      metrics_->Device(p.id, facts_.device, facts_.uuid, facts_.pci_bus_id, facts_.device_name);
    }
  }

  // Metrics and process state from a stored line.
  void OnStored(ProducerProcess& p) {
    switch (facts_.type) {
      case schema::EventType::kKernel:
        if (metrics_ != nullptr) {
          metrics_->Kernel(p.id, facts_.correlation_id, facts_.kernel_name, facts_.device,
                           facts_.limiting_resource, facts_.occupancy, facts_.graph_node_id,
                           /*remember=*/!facts_.untimed);
        }
        break;
      case schema::EventType::kLaunch:  // with its configuration's figures (HandleLine: launch_)
        if (metrics_ != nullptr && launch_ != nullptr) {
          if (!launch_->labels) {
            launch_->labels = metrics_->LabelsOf(launch_->name, launch_->limiting_resource);
          }
          // Counted with the run of launches of its configuration (FlushLaunchRun); remembered
          // for its kernel_time now.
          if (run_.config != launch_ || run_.process != &p) {
            FlushLaunchRun();
            run_.process = &p;
            run_.config = launch_;
          }
          ++run_.launches;
          // A launch outside a timing window gets no kernel_time: remembering it would only
          // evict launches whose kernel_time is coming (sampled: most launches are such).
          if (p.metrics_join && !facts_.untimed) {
            metrics_->RememberLaunch(p.id, facts_.correlation_id, launch_->labels->name_series,
                                     launch_->device, facts_.graph_node_id);
          }
        }
        break;
      case schema::EventType::kKernelTime:
        if (metrics_ != nullptr) {
          metrics_->KernelTime(p.id, facts_.correlation_id, facts_.device, facts_.duration_ns,
                               facts_.graph_node_id);
        }
        break;
      case schema::EventType::kApiError:
        if (metrics_ != nullptr) metrics_->ApiError(facts_.error_name, p.id);
        break;
      case schema::EventType::kProcessCrash:
        if (metrics_ != nullptr) metrics_->ProcessCrashed(p.id);
        break;
      case schema::EventType::kStats:
        UpdateDrops(p);
        break;
      case schema::EventType::kStall:
        if (metrics_ != nullptr) {
          metrics_->Stall(p.id, p.key.hostname, p.key.pid, p.key.exe, facts_.stall_ages,
                          Clock::now(), p.stall_label);
        }
        break;
      case schema::EventType::kProcessEnd:
        if (metrics_ != nullptr) metrics_->Stall(p.id, {}, 0, {}, {}, Clock::now());  // over
        UpdateDrops(p);
        if (!p.ended) ++stats_.processes_ended;
        p.ended = true;
        log_->info("process {} ({}, pid {}) ended: {} events stored, {} lost", p.id,
                   Printable(p.key.exe, 80), p.key.pid, p.stored, p.lost);
        break;
      default:
        break;
    }
  }

  // The producer's cumulative drop counters (timing_dropped too) only grow; a report may arrive
  // out of step with an earlier one (a retransmission after a collector restart), so only
  // increases count.
  void UpdateDrops(ProducerProcess& p) {
    if (metrics_ == nullptr) return;  // the counters were not read (ValidateLine)
    const uint64_t attributed =
        facts_.dropped_ring_full + facts_.dropped_disconnected + facts_.dropped_backpressure;
    const uint64_t other = facts_.dropped > attributed ? facts_.dropped - attributed : 0;
    // A count above what the process could have made is refused: its counter keeps its value.
    auto advance = [this, &p](uint64_t now_value, uint64_t* last, std::string_view counter,
                              auto add) {
      if (now_value > *last && Plausible(p, now_value, counter)) {
        add(now_value - *last);
        *last = now_value;
      }
    };
    const auto dropped = [this](std::string_view reason) {
      return [this, reason](uint64_t delta) { metrics_->ProducerDropped(reason, delta); };
    };
    advance(facts_.dropped_ring_full, &p.dropped_ring_full, "events_dropped", dropped("ring_full"));
    advance(facts_.dropped_disconnected, &p.dropped_disconnected, "events_dropped",
            dropped("disconnected"));
    advance(facts_.dropped_backpressure, &p.dropped_backpressure, "events_dropped",
            dropped("backpressure"));
    advance(other, &p.dropped_other, "events_dropped", dropped("other"));
    advance(facts_.timing_dropped, &p.timing_dropped, "kernel_timing_dropped",
            [this](uint64_t delta) { metrics_->ProducerTimingDropped(delta); });
    advance(facts_.occupancy_disagreements, &p.occupancy_disagreements, "occupancy_disagreements",
            [this](uint64_t delta) { metrics_->OccupancyDisagreements(delta); });
  }

  // The most events (and so the highest seq, and the most of any count) the process of `p` can
  // have made by now: kMaxEventsPerSecond for each second since it started, plus kSeqSlack.
  static uint64_t SeqBound(const ProducerProcess& p) {
    const int64_t ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - p.seq_origin).count();
    return kSeqSlack +
           static_cast<uint64_t>(std::max<int64_t>(ms, 0)) * (kMaxEventsPerSecond / 1000);
  }

  // Whether `value`, claimed by the producer of `p` for `counter`, is within SeqBound; if not,
  // the claim is refused: counted (cuflight_counts_refused_total{counter}) and logged (rate
  // limited), and the caller adds nothing.
  bool Plausible(const ProducerProcess& p, uint64_t value, std::string_view counter) {
    const uint64_t bound = SeqBound(p);
    if (value <= bound) return true;
    ++stats_.counts_refused;
    if (metrics_ != nullptr) metrics_->CountRefused(counter);
    uint64_t suppressed = 0;
    if (limiter_.Allow(kLogKeyConnection, Clock::now(), &suppressed)) {
      log_->warn(
          "process {} ({}, pid {}): refused {} for {}: more than it can have made by now "
          "({} at most){}",
          p.id, Printable(p.key.exe, 80), p.key.pid, value, counter, bound,
          suppressed > 0 ? fmt::format(" ({} similar messages suppressed)", suppressed)
                         : std::string());
    }
    return false;
  }

  // A seq received with a valid header: a gap before it is lost, exactly once.
  void AccountSeq(ProducerProcess& p, uint64_t seq) {
    if (p.highest_stored && seq <= *p.highest_stored) return;
    if (seq < p.next_expected) return;
    if (seq > p.next_expected && !Plausible(p, seq, "events_lost")) return;
    if (p.baseline_pending) {  // the preamble of a per-connection stream: no gap counts yet
      p.next_expected = seq + 1;
      return;
    }
    const uint64_t gap = seq - p.next_expected;
    p.next_expected = seq + 1;
    if (gap == 0) return;
    p.lost += gap;
    stats_.events_lost += gap;
    if (metrics_ != nullptr) metrics_->Lost(gap);
  }

  // The stream a process_start line names on connection `c` (producer_identity.h).
  ResolvedIdentity Resolve(const Connection& c, const schema::Header& header) const {
    ClaimedIdentity claim;
    claim.hostname = facts_.hostname;
    claim.exe = facts_.exe;
    claim.pid = header.pid;
    claim.start_ns = facts_.start_ns;
    claim.instance_id = facts_.instance_id;
    claim.pid_ns = facts_.pid_ns;
    PeerFacts peer;
    peer.is_unix = c.is_unix;
    peer.pid = c.peer_pid;
    peer.uid = c.peer_uid;
    peer.tcp_token = c.tcp_token;
    IdentityPolicy policy;
    policy.tcp_trust_identity = options_.tcp_trust_identity;
    policy.own_pid_ns = own_pid_ns_;
    return ResolveIdentity(claim, peer, policy);
  }

  // The steady-clock time of a process start claimed as `start_ns` (realtime): now when it is in
  // the future, at most kMaxStreamAgeCredit ago.
  static Clock::time_point SeqOrigin(int64_t start_ns) {
    const int64_t now_ns = base::NowRealtimeNs();
    const int64_t credit_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(kMaxStreamAgeCredit).count();
    int64_t age_ns = 0;
    if (start_ns < now_ns) age_ns = start_ns < now_ns - credit_ns ? credit_ns : now_ns - start_ns;
    return Clock::now() - std::chrono::nanoseconds(age_ns);
  }

  bool Identify(Connection& c, const schema::Header& header) {
    ResolvedIdentity resolved = Resolve(c, header);
    ProcessKey& key = resolved.key;
    std::string map_key = MapKey(key);
    auto it = processes_.find(map_key);
    ProducerProcess* p = nullptr;
    if (it != processes_.end()) {
      p = it->second.get();
      if (p->recovering) CancelRecovery(*p);
      if (sink_->refusing(p->stream)) {
        if (p->connections > 0) {
          Reject(c, RejectReason::kStoreFailed, "the log is not accepting lines (buffers full)");
          c.close_requested = true;
          return false;
        }
        // Acquiring again lets the stream take lines again (the producer resends them).
        sink_->Release(p->stream);
        std::string error;
        p->stream = sink_->Acquire(p->key, &error);
        if (p->stream == nullptr) {
          Reject(c, RejectReason::kStoreFailed, "cannot open the log: " + error);
          c.close_requested = true;
          if (metrics_ != nullptr) ForgetProcessMetrics(p->id);
          Unlinger(*p);
          processes_.erase(it);
          return false;
        }
      }
      if (p->lost_deadline) {
        log_->info("process {} ({}, pid {}) reconnected", p->id, Printable(p->key.exe, 80),
                   p->key.pid);
      }
      p->lost_deadline.reset();
      Unlinger(*p);
      DropBlackbox(*p);  // alive: it sends what it holds again, and its connection passes its own
    } else {
      std::string error;
      LogSink::Stream* stream = sink_->Acquire(key, &error);
      if (stream == nullptr) {
        Reject(c, RejectReason::kStoreFailed, "cannot open the log: " + error);
        c.close_requested = true;
        return false;
      }
      auto owned = std::make_unique<ProducerProcess>();
      p = owned.get();
      p->id = next_process_id_++;
      p->map_key = map_key;
      p->key = std::move(key);
      p->stream = stream;
      p->highest_stored = sink_->highest_seq(stream);
      p->next_expected = p->highest_stored ? *p->highest_stored + 1 : 0;
      p->per_connection = resolved.per_connection;
      p->seq_origin = SeqOrigin(facts_.start_ns);
      if (!p->key.owner.empty()) {
        p->stall_label = fmt::format("{}-{}", p->key.instance_id, p->key.owner);
      }
      p->baseline_pending = resolved.per_connection;
      processes_.emplace(std::move(map_key), std::move(owned));
      ++stats_.processes_seen;
      log_->info(
          "process {} identified: {} on {}, pid {}{}{}{} ({}){}", p->id, Printable(p->key.exe, 80),
          Printable(p->key.hostname, 64), p->key.pid,
          header.pid != p->key.pid ? fmt::format(" (payload pid {})", header.pid) : std::string(),
          facts_.pid_ns != 0 ? fmt::format(" in pid namespace {}", facts_.pid_ns) : std::string(),
          p->key.owner.empty()
              ? std::string()
              : fmt::format(", instance {}, owner {}", p->key.instance_id, p->key.owner),
          c.peer,
          p->highest_stored ? fmt::format("; log holds up to seq {}", *p->highest_stored)
                            : std::string());
    }
    ++p->connections;
    c.process = p;
    c.rewrite_pid = resolved.rewrite_pid;
    c.stored_pid = p->key.pid;
    c.framer.set_max_line_bytes(options_.max_line_bytes);
    return true;
  }

  void Reject(Connection& c, RejectReason reason, std::string_view message) {
    ++stats_.lines_rejected;
    ++stats_.rejected[static_cast<size_t>(reason)];
    const std::string_view name = RejectReasonName(reason);
    if (metrics_ != nullptr) metrics_->Rejected(name);
    uint64_t suppressed = 0;
    if (limiter_.Allow(static_cast<int>(reason), Clock::now(), &suppressed)) {
      log_->warn("connection {} ({}): line rejected ({}): {}{}", c.id, c.peer, name,
                 Printable(message, 240),
                 suppressed > 0
                     ? fmt::format(" ({} more {} rejections not logged)", suppressed, name)
                     : std::string());
    }
  }

  // ---- acknowledgements ----

  void MarkForAck(Connection& c) {
    if (c.dirty) return;
    c.dirty = true;
    dirty_.push_back(c.id);
  }

  void SendAcks() {
    for (const uint64_t id : dirty_) {
      auto it = connections_.find(id);
      if (it == connections_.end()) continue;
      Connection& c = *it->second;
      c.dirty = false;
      if (c.process == nullptr || c.acks_off) continue;
      const std::optional<uint64_t> written = sink_->written_seq(c.process->stream);
      if (!written) continue;
      const uint64_t seq = *written;
      if (c.ack_wanted_set && c.ack_wanted >= seq) continue;
      c.ack_wanted = seq;
      c.ack_wanted_set = true;
      TrySendAck(c);
    }
    dirty_.clear();
  }

  // Writes what fits of the pending ack without blocking; keeps EPOLLOUT while something waits.
  // A write error means the producer will read no more acks (it closed or died); what it sent
  // before is still in the socket, so the connection is not closed for it: it is read to its end
  // like any other, without acks.
  void TrySendAck(Connection& c) {
    if (c.acks_off) return;
    if (!c.out_pending.empty()) {
      const ssize_t n =
          send(c.fd, c.out_pending.data(), c.out_pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          StopAcks(c, errno);
        } else {
          SetWriteInterest(c, true);
        }
        return;
      }
      c.out_pending.erase(0, static_cast<size_t>(n));
      if (!c.out_pending.empty()) {
        SetWriteInterest(c, true);
        return;
      }
    }
    if (c.ack_wanted_set && (!c.ack_sent_set || c.ack_wanted > c.ack_sent)) {
      std::array<char, schema::kMaxAckLineBytes> buf;
      const size_t len = schema::EncodeAck(c.ack_wanted, buf.data(), buf.size());
      const ssize_t n = send(c.fd, buf.data(), len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          StopAcks(c, errno);
        } else {
          SetWriteInterest(c, true);
        }
        return;
      }
      c.ack_sent = c.ack_wanted;
      c.ack_sent_set = true;
      ++stats_.acks_sent;
      if (static_cast<size_t>(n) < len) {
        c.out_pending.assign(buf.data() + n, len - static_cast<size_t>(n));
        SetWriteInterest(c, true);
        return;
      }
    }
    SetWriteInterest(c, false);
  }

  void StopAcks(Connection& c, int err) {
    c.acks_off = true;
    c.out_pending.clear();
    c.out_pending.shrink_to_fit();
    SetWriteInterest(c, false);
    ++stats_.ack_write_failures;
    log_->debug("connection {} ({}): ack write failed: {}; reading on without acks", c.id, c.peer,
                Errno(err));
  }

  void SetWriteInterest(Connection& c, bool want) {
    if (c.epollout == want) return;
    epoll_event ev{};
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.u64 = c.id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) == 0) c.epollout = want;
  }

  // ---- end of a turn, periodic work ----

  void EndTurn() {
    if (appended_) {
      sink_->Flush();
      ++stats_.flushes;
      appended_ = false;
    }
    SendAcks();
    ReleaseFinished();
    PublishBytesWritten();
    Publish();
  }

  void PublishBytesWritten() {
    if (metrics_ == nullptr) return;
    const LogSinkStats sink = sink_->stats();
    if (sink.bytes_written > bytes_written_reported_) {
      metrics_->BytesWritten(sink.bytes_written - bytes_written_reported_);
      bytes_written_reported_ = sink.bytes_written;
    }
    metrics_->SetLogTotals({.write_errors = sink.write_errors,
                            .pending_bytes = sink.pending_bytes,
                            .fsync_rounds_skipped = sink.fsync_rounds_skipped,
                            .recovery_failures = sink.recovery_failures});
  }

  void Tick(Clock::time_point now) {
    sink_->Tick(std::chrono::system_clock::now());
    if (sink_->has_pending()) RetryPendingWrites();
    std::vector<uint64_t> expired;
    std::vector<uint64_t> idle;
    for (auto& [id, c] : connections_) {
      if (c->process == nullptr && now - c->accepted_at >= options_.handshake_timeout) {
        expired.push_back(id);
      } else if (c->process != nullptr && options_.idle_timeout.count() > 0 &&
                 now - c->last_input >= options_.idle_timeout) {
        idle.push_back(id);
      }
    }
    for (const uint64_t id : idle) {
      Connection& c = *connections_.at(id);
      ++stats_.idle_timeouts;
      if (metrics_ != nullptr) metrics_->ConnectionClosed("idle_timeout");
      uint64_t suppressed = 0;
      if (limiter_.Allow(kLogKeyConnection, now, &suppressed)) {
        log_->warn(
            "connection {} ({}): nothing received for {} ms; closed (a live producer "
            "reconnects when it sends again)",
            c.id, c.peer, options_.idle_timeout.count());
      }
      CloseConnection(id);
    }
    for (const uint64_t id : expired) {
      Connection& c = *connections_.at(id);
      ++stats_.handshake_timeouts;
      if (metrics_ != nullptr) metrics_->ConnectionClosed("handshake_timeout");
      uint64_t suppressed = 0;
      if (limiter_.Allow(kLogKeyConnection, now, &suppressed)) {
        log_->warn("connection {} ({}): no valid process_start within {} ms; closed", c.id, c.peer,
                   options_.handshake_timeout.count());
      }
      CloseConnection(id);
    }
    AskUnwatchedBlackboxes();
    bool wrote = false;
    for (auto& [key, p] : processes_) {
      if (p->connections == 0 && !p->ended && p->lost_deadline && now >= *p->lost_deadline) {
        p->lost_deadline.reset();
        if (RecoverIfGone(*p)) continue;  // process_lost follows the reading
        WriteProcessLost(*p, schema::LostReason::kDisconnected);
        finished_.push_back(p->map_key);
        wrote = true;
      }
    }
    if (wrote) {
      sink_->Flush();
      ++stats_.flushes;
    }
    ReleaseFinished();
    Publish();
  }

  // A write that failed (a full disk) is retried on the timer, not only after a turn that read
  // lines: a producer whose window of unacknowledged events is full sends nothing until an ack
  // comes, so without this, writing would resume only when it exits.
  void RetryPendingWrites() {
    sink_->Flush();
    ++stats_.flushes;
    for (auto& [id, c] : connections_) {
      if (c->process != nullptr) MarkForAck(*c);
    }
    SendAcks();
    PublishBytesWritten();
  }

  void Publish() {
    stats_.connections_open = connections_.size();
    const LogSinkStats sink = sink_->stats();
    std::lock_guard<std::mutex> lock(published_mu_);
    published_ = stats_;
    published_sink_ = sink;
  }

  // ---- connection and process end ----

  void CloseConnection(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    Connection& c = *it->second;
    if (c.framer.mid_line()) {
      ++stats_.lines_received;
      Reject(c, RejectReason::kTruncatedLine, "the connection ended inside a line");
    }
    if (ProducerProcess* p = c.process) {
      --p->connections;
      if (p->connections == 0) {
        if (p->ended) {
          finished_.push_back(p->map_key);
        } else if (stopping_) {
          // Shutdown() writes process_lost for it.
        } else if (!Linger(*p, c)) {
          // No room to hold it: written off now, its black box unread.
          WriteProcessLost(*p, schema::LostReason::kDisconnected);
          finished_.push_back(p->map_key);
        } else if (c.blackbox != nullptr) {
          // The producer may be dying: its black box is read once it is gone, or at the end of
          // the grace if it is gone by then; a producer that comes back brings its own.
          WatchBlackbox(*p, std::move(c.blackbox));
          p->lost_deadline =
              Clock::now() + std::max<Clock::duration>(options_.reconnect_grace, kBlackboxWait);
        } else if (options_.reconnect_grace.count() == 0 || p->per_connection) {
          // Nobody can continue a per-connection stream: no grace to wait for.
          Unlinger(*p);
          WriteProcessLost(*p, schema::LostReason::kDisconnected);
          finished_.push_back(p->map_key);
        } else {
          p->lost_deadline = Clock::now() + options_.reconnect_grace;
        }
      }
    }
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    ReleaseOwnerSlot(c);
    ++stats_.connections_closed;
    if (metrics_ != nullptr) metrics_->ProducerDisconnected();
    log_->debug("connection {} ({}) closed", c.id, c.peer);
    connections_.erase(it);
  }

  // Whether `p`, whose last connection `c` is ending without process_end, may be held (for a
  // reconnect within the grace, or for its black box): it then takes one of the owner's
  // lingering slots (at most the per-owner share, and --max-connections in all), which bounds
  // the streams, and so the descriptors, held without a connection. Refused: counted, logged.
  bool Linger(ProducerProcess& p, const Connection& c) {
    if (c.blackbox == nullptr && (options_.reconnect_grace.count() == 0 || p.per_connection)) {
      return true;  // written off at once (no slot taken)
    }
    const uid_t owner = c.is_unix ? c.peer_uid : kTcpOwner;
    int& count = lingering_by_owner_[owner];
    if (count >= PerOwnerLimit() || lingering_ >= static_cast<size_t>(options_.max_connections)) {
      if (count == 0) lingering_by_owner_.erase(owner);
      ++stats_.linger_refusals;
      if (metrics_ != nullptr) metrics_->ConnectionRefused("linger_limit");
      uint64_t suppressed = 0;
      if (limiter_.Allow(kLogKeyConnection, Clock::now(), &suppressed)) {
        log_->warn(
            "process {} ({}, pid {}): its connection ended and it cannot be held for its return "
            "or its black box ({} holds {} such processes, {} in all); written off now{}",
            p.id, Printable(p.key.exe, 80), p.key.pid, OwnerName(owner), count, lingering_,
            suppressed > 0 ? fmt::format(" ({} similar messages suppressed)", suppressed)
                           : std::string());
      }
      return false;
    }
    ++count;
    ++lingering_;
    p.lingering_owner = owner;
    return true;
  }

  // Gives back the lingering slot of `p` (it came back, or is released).
  void Unlinger(ProducerProcess& p) {
    if (!p.lingering_owner) return;
    const auto it = lingering_by_owner_.find(*p.lingering_owner);
    if (it != lingering_by_owner_.end() && --it->second <= 0) lingering_by_owner_.erase(it);
    --lingering_;
    p.lingering_owner.reset();
  }

  // ---- black boxes ----

  // Keeps `box` for `p` (replacing an older one) and watches its pidfd: OnProducerGone when the
  // producer has exited.
  // A box whose end is learnt from a /proc directory has no pidfd to watch: Tick asks it
  // (AskUnwatchedBlackboxes).
  void WatchBlackbox(ProducerProcess& p, std::unique_ptr<ProducerBlackbox> box) {
    DropBlackbox(p);
    if (box->pidfd() >= 0 && !Watch(box->pidfd(), kTokenProducerGone | p.id, EPOLLIN)) {
      log_->error("cannot watch the pidfd of process {}: {}", p.id, Errno(errno));
    }
    p.blackbox = std::move(box);
  }

  void DropBlackbox(ProducerProcess& p) {
    if (p.blackbox == nullptr) return;
    if (p.blackbox->pidfd() >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, p.blackbox->pidfd(), nullptr);
    p.blackbox.reset();
  }

  // Every tick: the boxes of disconnected producers whose end only a /proc directory tells
  // (producer_blackbox.h, design note 1d), read as soon as it says the producer is gone.
  void AskUnwatchedBlackboxes() {
    std::vector<uint64_t> gone;
    for (const auto& [key, p] : processes_) {
      if (p->blackbox != nullptr && p->blackbox->pidfd() < 0 && p->connections == 0 &&
          p->blackbox->ProducerGone()) {
        gone.push_back(p->id);
      }
    }
    for (const uint64_t id : gone) OnProducerGone(id);
  }

  // The producer of process `id` has exited: nothing more can come from it, so its black box is
  // read and process_lost written now.
  void OnProducerGone(uint64_t id) {
    for (auto& [key, p] : processes_) {
      if (p->id != id || p->blackbox == nullptr) continue;
      if (p->connections > 0 || p->ended) {  // a stream another connection carries on
        DropBlackbox(*p);
        return;
      }
      p->lost_deadline.reset();
      if (RecoverIfGone(*p)) return;  // process_lost follows the reading
      WriteProcessLost(*p, schema::LostReason::kDisconnected);
      finished_.push_back(p->map_key);
      return;
    }
  }

  // Queues the pending black box of `p` for reading (RecoverSlice) if its producer has exited,
  // and returns true: process_lost is written when the reading ends. Otherwise lets it go (a
  // producer still alive at the deadline keeps what it holds) and returns false.
  bool RecoverIfGone(ProducerProcess& p) {
    if (p.blackbox == nullptr) return false;
    if (!p.blackbox->ProducerGone()) {
      ++stats_.blackbox_skipped_alive;
      log_->info(
          "process {} ({}, pid {}): still running when its connection's grace ended; its "
          "black box is not read",
          p.id, Printable(p.key.exe, 80), p.key.pid);
      DropBlackbox(p);
      return false;
    }
    if (p.blackbox->pidfd() >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, p.blackbox->pidfd(), nullptr);
    PendingRecovery r;
    r.map_key = p.map_key;
    r.box = std::move(p.blackbox);
    recoveries_.push_back(std::move(r));
    p.recovering = true;
    return true;
  }

  // A process whose black box is being read came back (a connection identified as it): the
  // reading stops; what it stored stays, and the connection's lines carry on the stream.
  void CancelRecovery(ProducerProcess& p) {
    for (auto it = recoveries_.begin(); it != recoveries_.end(); ++it) {
      if (it->map_key != p.map_key) continue;
      log_->info(
          "process {} ({}, pid {}) reconnected while its black box was read; the reading "
          "stops after {} events",
          p.id, Printable(p.key.exe, 80), p.key.pid, it->stored);
      recoveries_.erase(it);
      break;
    }
    p.recovering = false;
  }

  // One slice (kRecoverySlice) of the oldest queued recovery; its lines are flushed at the end
  // of the turn. When the black box is read to its end, the counts are taken and process_lost
  // written. What one recovery holds in memory is bounded (region_reader.h) and made only when
  // it reaches the front of the queue.
  void RecoverSlice() {
    if (recoveries_.empty()) return;
    PendingRecovery& r = recoveries_.front();
    const auto it = processes_.find(r.map_key);
    if (it == processes_.end() || !it->second->recovering) {
      recoveries_.pop_front();
      return;
    }
    ProducerProcess& p = *it->second;
    if (r.recovery == nullptr) {
      blackbox::RecoveryOptions options;
      options.after_seq = p.highest_stored;
      options.pid = p.key.pid;
      options.max_line_bytes = options_.max_line_bytes;
      options.max_total_bytes = kMaxRecoveredBytesPerBox;
      r.source = std::make_unique<blackbox::FdSource>(r.box->fd(), r.box->size());
      r.recovery = std::make_unique<blackbox::RegionRecovery>(r.source.get(), options);
    }
    const bool done =
        r.recovery->Step(kRecoverySlice, [this, &p, &r](uint64_t seq, std::string_view line) {
          if (StoreRecovered(p, seq, line)) {
            ++r.stored;
          } else if (sink_->refusing(p.stream)) {
            ++r.refused;
          }
        });
    if (!done) return;
    const PendingRecovery finished = std::move(r);
    recoveries_.pop_front();
    p.recovering = false;
    EndRecovery(p, finished);
    WriteProcessLost(p, schema::LostReason::kDisconnected);
    finished_.push_back(p.map_key);
  }

  // The counts of a black box read to its end.
  void EndRecovery(ProducerProcess& p, const PendingRecovery& r) {
    const blackbox::RecoveryResult& result = r.recovery->result();
    ++stats_.blackboxes_read;
    if (result.error != blackbox::RegionError::kNone) {
      ++stats_.blackbox_errors;
      const std::string_view reason = blackbox::RegionErrorName(result.error);
      if (metrics_ != nullptr) metrics_->BlackboxError(reason);
      log_->warn("process {} ({}, pid {}): its black box cannot be read ({}): {}", p.id,
                 Printable(p.key.exe, 80), p.key.pid, reason, Printable(result.message, 240));
      return;
    }
    p.blackbox_read = true;
    // The seqs the producer used after the last one stored (sent and never received, or made
    // and dropped) are missing from the log like a gap.
    if (result.end_seq > p.next_expected && Plausible(p, result.end_seq, "events_lost")) {
      const uint64_t missing = result.end_seq - p.next_expected;
      p.next_expected = result.end_seq;
      p.lost += missing;
      stats_.events_lost += missing;
      if (metrics_ != nullptr) metrics_->Lost(missing);
    }
    stats_.blackbox_torn += result.torn;
    stats_.blackbox_unrecoverable += result.unrecoverable;
    if (result.invalid > 0) {
      ++stats_.blackbox_errors;
      if (metrics_ != nullptr) metrics_->BlackboxError("invalid_entries");
    }
    log_->info(
        "process {} ({}, pid {}): {} events recovered from its black box ({} kernel, {} device; "
        "{} it had used seqs for could not be made, {} launches torn by the kill{}{})",
        p.id, Printable(p.key.exe, 80), p.key.pid, r.stored, result.kernels, result.devices,
        result.unrecoverable, result.torn,
        result.invalid > 0 ? fmt::format(", {} invalid entries", result.invalid) : std::string(),
        r.refused > 0 ? fmt::format(", {} made and not stored: the log refused them ({} write "
                                    "errors so far)",
                                    r.refused, sink_->stats().write_errors)
                      : std::string());
  }

  // A line made from a black box: validated as a received one is, stored, counted as recovered.
  // A line that does not pass (only a corrupt region makes one) stays a gap, counted as lost.
  // Returns whether it was stored.
  bool StoreRecovered(ProducerProcess& p, uint64_t seq, std::string_view line) {
    if (sink_->refusing(p.stream)) return false;  // the rest is lost too; not worth validating
    launch_ = nullptr;  // a black box gives kernel and device events only
    const schema::Reason verdict = ValidateLine(line, &facts_, metrics_ != nullptr);
    if (verdict != schema::Reason::kOk || !facts_.header || facts_.header->seq != seq ||
        (facts_.type != schema::EventType::kKernel && facts_.type != schema::EventType::kDevice)) {
      ++stats_.blackbox_lines_rejected;
      if (metrics_ != nullptr) metrics_->BlackboxError("line_rejected");
      uint64_t suppressed = 0;
      if (limiter_.Allow(kLogKeyConnection, Clock::now(), &suppressed)) {
        log_->warn("process {}: a line recovered from its black box was rejected ({}): {}", p.id,
                   schema::ReasonName(verdict), Printable(facts_.message, 240));
      }
      return false;
    }
    if (p.highest_stored && seq <= *p.highest_stored) return false;
    if (!sink_->Append(p.stream, seq, line)) return false;  // a gap, counted at the end
    AccountSeq(p, seq);
    p.highest_stored = seq;
    ++p.stored;
    ++p.recovered;
    ++stats_.lines_stored;
    ++stats_.events_recovered;
    appended_ = true;
    if (metrics_ != nullptr) {
      metrics_->EventStored(facts_.type);
      metrics_->Recovered(1);
    }
    NoteIdentity(p);
    OnStored(p);
    return true;
  }

  // Appends process_lost to the process's log. last_seq (also the line's seq) is the highest seq
  // in the log, this run's or an earlier one's, so a log's last line always carries the highest
  // stored seq (what a restarted collector recovers). A process with nothing in its log gets no
  // process_lost: there is no log to end.
  void WriteProcessLost(ProducerProcess& p, schema::LostReason reason) {
    p.lost_written = true;
    CountUnstored(p);
    if (!p.highest_stored) return;
    ProcessLostRecord record;
    record.ts_ns = base::NowRealtimeNs();
    record.pid = p.key.pid;
    record.last_seq = p.highest_stored;
    record.reason = reason;
    record.events_stored = p.stored;
    record.events_lost = p.lost;
    if (p.blackbox_read) record.events_recovered = p.recovered;
    sink_->AppendCollectorEvent(p.stream, EncodeProcessLost(record));
    if (metrics_ != nullptr) {
      metrics_->EventStored("process_lost");
      metrics_->ProcessLost(p.id);
    }
    appended_ = true;
    ++stats_.processes_lost;
    log_->info("process {} ({}, pid {}) lost ({}): last seq {}, {} events stored{}, {} lost", p.id,
               Printable(p.key.exe, 80), p.key.pid, schema::LostReasonName(reason),
               *p.highest_stored, p.stored,
               p.blackbox_read ? fmt::format(" ({} recovered from its black box)", p.recovered)
                               : std::string(),
               p.lost);
  }

  // Lines the log refused (its buffers full) and the producer did not send again are missing
  // from the log like a gap: from the last seq accounted for up to the highest refused one.
  void CountUnstored(ProducerProcess& p) {
    if (!p.highest_refused || *p.highest_refused < p.next_expected) return;
    const uint64_t missing = *p.highest_refused - p.next_expected + 1;
    p.next_expected = *p.highest_refused + 1;
    p.lost += missing;
    stats_.events_lost += missing;
    stats_.events_unstored += missing;
    if (metrics_ != nullptr) metrics_->Unstored(missing);
    log_->warn(
        "process {} ({}, pid {}): {} events up to seq {} were received but not stored (the log "
        "refused them: its buffers were full) and were not sent again; counted as lost",
        p.id, Printable(p.key.exe, 80), p.key.pid, missing, *p.highest_refused);
  }

  // Releases the streams of processes that are over, after their last lines were flushed.
  void ReleaseFinished() {
    if (finished_.empty()) return;
    if (appended_) {
      sink_->Flush();
      ++stats_.flushes;
      appended_ = false;
    }
    for (const std::string& key : finished_) {
      auto it = processes_.find(key);
      if (it == processes_.end()) continue;
      ProducerProcess& p = *it->second;
      if (p.connections > 0) continue;  // came back before the release
      sink_->Release(p.stream);
      if (metrics_ != nullptr) ForgetProcessMetrics(p.id);
      Unlinger(p);
      processes_.erase(it);
    }
    finished_.clear();
  }

  void Shutdown() {
    stopping_ = true;
    log_->info("stopping: draining {} connections", connections_.size());
    unix_.Close();
    tcp_.Close();
    // Drain: what producers have already sent is read and stored (a bounded amount, so a
    // producer that keeps sending cannot hold the shutdown).
    std::vector<uint64_t> ids;
    for (auto& [id, c] : connections_) {
      for (int reads = 0; reads < kDrainReadsPerConnection && !c->close_requested; ++reads) {
        const uint64_t before = stats_.bytes_received;
        ReadOnce(*c);
        if (stats_.bytes_received == before) break;
      }
      if (c->close_requested) ids.push_back(id);
    }
    for (const uint64_t id : ids) CloseConnection(id);
    ids.clear();
    for (auto& [key, p] : processes_) {
      if (!p->ended && p->connections == 0 && !p->recovering) RecoverIfGone(*p);
    }
    // The black boxes of dead producers are read to their ends (each is bounded:
    // kMaxRecoveredBytesPerBox), flushed a slice at a time; each writes its process_lost.
    while (!recoveries_.empty()) {
      RecoverSlice();
      if (appended_) {
        sink_->Flush();
        ++stats_.flushes;
        appended_ = false;
      }
    }
    for (auto& [key, p] : processes_) {
      if (p->ended || p->lost_written) continue;
      WriteProcessLost(*p, p->connections > 0 ? schema::LostReason::kCollectorShutdown
                                              : schema::LostReason::kDisconnected);
    }
    if (appended_) {
      sink_->Flush();
      ++stats_.flushes;
      appended_ = false;
    }
    SendAcks();
    for (auto& [id, c] : connections_) ids.push_back(id);
    for (const uint64_t id : ids) CloseConnection(id);
    for (auto& [key, p] : processes_) {
      sink_->Release(p->stream);
      if (metrics_ != nullptr) ForgetProcessMetrics(p->id);
    }
    processes_.clear();
    finished_.clear();
    sink_->Flush();
    PublishBytesWritten();
    Publish();
    log_->info("stopped: {} lines stored, {} rejected, {} duplicates, {} lost", stats_.lines_stored,
               stats_.lines_rejected, stats_.duplicates, stats_.events_lost);
  }

  CollectorOptions options_;
  Metrics* metrics_;
  std::shared_ptr<spdlog::logger> log_;
  LogRateLimiter limiter_;

  std::unique_ptr<LogSink> sink_;
  UnixListener unix_;
  TcpListener tcp_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int spare_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reopen_{false};
  bool stopping_ = false;

  const uint64_t own_pid_ns_ = OwnPidNamespace();
  std::vector<char> read_buf_;
  LineFacts facts_;
  // The configuration of the launch line being handled (HandleLine to OnStored), or nullptr.
  ProducerProcess::InternedConfig* launch_ = nullptr;
  // The metrics held for the read being handled (FlushMetrics): the launches in a row of one
  // configuration of one process, not counted yet, and the lines received and stored by type.
  struct LaunchRun {
    ProducerProcess* process = nullptr;
    ProducerProcess::InternedConfig* config = nullptr;
    uint64_t launches = 0;
  };
  LaunchRun run_;
  std::array<uint64_t, schema::kEventTypeCount + 1> tally_received_{};
  std::array<uint64_t, schema::kEventTypeCount + 1> tally_stored_{};
  std::string rewrite_buf_;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::unordered_map<std::string, std::unique_ptr<ProducerProcess>> processes_;
  std::unordered_map<uid_t, int> owner_connections_;   // open connections by uid (or kTcpOwner)
  std::unordered_map<uid_t, int> lingering_by_owner_;  // processes held without a connection
  size_t lingering_ = 0;                               // their sum
  uint64_t next_connection_id_ = kFirstConnectionId;
  uint64_t next_process_id_ = 1;
  std::vector<uint64_t> dirty_;        // connections to acknowledge after this turn's flush
  std::vector<std::string> finished_;  // processes to release after this turn's flush
  // Dead producers' black boxes being read, oldest first; RecoverSlice reads the front one.
  std::deque<PendingRecovery> recoveries_;
  bool appended_ = false;
  uint64_t bytes_written_reported_ = 0;

  IngestStats stats_;
  mutable std::mutex published_mu_;
  IngestStats published_;
  LogSinkStats published_sink_{};
};

Collector::Collector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Collector::~Collector() = default;

std::unique_ptr<Collector> Collector::Create(const CollectorOptions& options, Metrics* metrics,
                                             std::shared_ptr<spdlog::logger> logger,
                                             StartupError* error) {
  try {
    auto impl = std::make_unique<Impl>(options, metrics, std::move(logger));
    if (!impl->Start(error)) return nullptr;
    const int port = impl->tcp_port();
    std::unique_ptr<Collector> collector(new Collector(std::move(impl)));
    collector->socket_path_ = options.socket;
    collector->tcp_port_ = port;
    return collector;
  } catch (const std::exception& e) {
    *error = {1, std::string("cannot start: ") + e.what()};
    return nullptr;
  }
}

int Collector::Run() {
  try {
    return impl_->Run();
  } catch (const std::exception& e) {
    spdlog::critical("collector stopped by an unexpected error: {}", e.what());
    return 1;
  }
}

void Collector::RequestStop() { impl_->RequestStop(); }
void Collector::RequestReopen() { impl_->RequestReopen(); }
IngestStats Collector::stats() const { return impl_->stats(); }
LogSinkStats Collector::sink_stats() const { return impl_->sink_stats(); }

}  // namespace cuflight::collector
