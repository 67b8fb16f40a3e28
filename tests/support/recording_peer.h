// The test double for what a collector never does: a Unix-socket (or TCP loopback) server on its
// own thread that records what each connection sent, and misbehaves when told to: it reads
// slowly or not at all, shuts down its read side, holds back acknowledgements, writes what the
// test gives it (acks, garbage) with SendRaw, or dies abruptly with data unread.
//
// It stores nothing, de-duplicates nothing and acknowledges nothing itself. Given an upstream
// (the socket of a real collector, running_collector.h), it relays each connection to it over a
// connection of its own, byte for byte (a descriptor passed with SCM_RIGHTS is recorded, not
// relayed), and relays the collector's acks back unless held: what a producer delivered is then
// what the real collector stored, and a peer killed between the producer and the collector is
// a collector that died, its log (the collector behind it) surviving.
#ifndef CUFLIGHT_TESTS_SUPPORT_RECORDING_PEER_H_
#define CUFLIGHT_TESTS_SUPPORT_RECORDING_PEER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace cuflight::test_support {

// A descriptor a connection passed with SCM_RIGHTS: the file it refers to, and the byte of the
// stream it came with.
struct PassedFd {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t at_byte = 0;
  // For a pidfd, the pid of its process as the kernel's /proc/self/fdinfo says ("Pid:"); else 0.
  int64_t pidfd_pid = 0;
};

class RecordingPeer {
 public:
  struct Connection {
    pid_t pid = 0;                   // SO_PEERCRED; 0 over TCP
    std::vector<uint64_t> seqs;      // the "seq" of every line received, in order
    std::vector<std::string> lines;  // every line received, with its '\n'
    uint64_t bytes = 0;
    bool open = true;
    std::vector<PassedFd> passed;
  };

  // Binds and listens on `path` (unlinking a stale file first) and starts the server thread;
  // relays to the Unix socket `upstream` unless it is empty.
  explicit RecordingPeer(std::string path, std::string upstream = "");
  // Listens on 127.0.0.1 with a kernel-chosen port (see port()).
  struct TcpTag {};
  explicit RecordingPeer(TcpTag, std::string upstream = "");
  ~RecordingPeer();  // Kill()
  RecordingPeer(const RecordingPeer&) = delete;
  RecordingPeer& operator=(const RecordingPeer&) = delete;

  // Stops abruptly: the thread ends, every socket is closed with whatever it still holds unread
  // (the relays to the collector too), the socket file is removed. Idempotent.
  void Kill();

  // Drops (true) or relays (false, the default) the collector's acks.
  void SetHoldAcks(bool hold);
  // Bytes per read(2): small values make a slow reader.
  void SetReadChunk(size_t bytes);
  // Stops (or resumes) reading every connection; unread data stays in the kernel buffers.
  void SetPaused(bool paused);
  // Writes raw bytes (acks, garbage) to connection `index` (in accept order).
  void SendRaw(size_t index, std::string_view bytes);
  // shutdown(SHUT_RD) on connection `index`: the peer's next send fails with EPIPE.
  void ShutdownRead(size_t index);

  int port() const { return port_; }
  std::vector<Connection> connections() const;
  size_t connection_count() const;
  // Lines received so far on connection `index` (0 if there is no such connection).
  size_t received(size_t index) const;
  // The seq of the last line received on connection `index`, or -1.
  int64_t last_seq(size_t index) const;

 private:
  struct Conn {
    int fd = -1;
    bool read_shut = false;
    std::string partial;
    Connection info;
    int up = -1;             // the relay to the collector
    bool up_opened = false;  // once: a relay the collector closed is not opened again
    std::string up_out;      // received, not yet relayed
  };
  void Start(int listen_fd);
  void Run();
  void Wake();
  void AcceptAll();
  // Reads once from `c`; false when the connection ended.
  bool ReadOnce(Conn& c);
  int ConnectUpstream();
  void FlushUpstream(Conn& c);
  void RelayFromCollector(Conn& c);
  // Relays what is left, then closes the relay (the producer closed its connection).
  void CloseUpstream(Conn& c);

  mutable std::mutex mu_;  // guards everything below
  std::string path_;
  std::string upstream_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  bool stop_ = false;
  bool killed_ = false;
  size_t read_chunk_ = 64 << 10;
  bool paused_ = false;
  bool hold_acks_ = false;
  std::vector<std::unique_ptr<Conn>> conns_;
};

}  // namespace cuflight::test_support

#endif  // CUFLIGHT_TESTS_SUPPORT_RECORDING_PEER_H_
