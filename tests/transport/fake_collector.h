// A stand-in for the collector in the transport tests: a Unix-socket (or TCP loopback) server on
// its own thread that reads newline-delimited lines, records every line per connection, stores
// each seq of a peer process at most once (skipping a seq not above the highest stored, as the
// real collector does) and acks the highest stored seq after each read.
//
// The store outlives a server: a restarted server given the same Store continues from what the
// previous one stored, as the real collector recovers it from its logs.
#ifndef CUFLIGHT_TESTS_TRANSPORT_FAKE_COLLECTOR_H_
#define CUFLIGHT_TESTS_TRANSPORT_FAKE_COLLECTOR_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace cuflight::transport::testing {

struct Store {
  mutable std::mutex mu;              // guards everything here and every FakeCollector's state
  std::map<pid_t, uint64_t> highest;  // highest stored seq per peer pid
  std::map<pid_t, std::vector<uint64_t>> stored;  // stored seqs per pid, in order
  std::map<pid_t, std::vector<std::string>> stored_lines;
  uint64_t duplicates = 0;  // lines skipped because their seq was not above the highest
};

// A descriptor a connection passed with SCM_RIGHTS: the file it refers to, and the byte of the
// stream it came with.
struct PassedFd {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t at_byte = 0;
};

class FakeCollector {
 public:
  struct Connection {
    pid_t pid = 0;               // SO_PEERCRED; 0 over TCP
    std::vector<uint64_t> seqs;  // every line received, in order (duplicates included)
    std::vector<std::string> lines;
    uint64_t bytes = 0;
    bool open = true;
    std::vector<PassedFd> passed;
  };
  enum class AckMode { kAuto, kNone };

  // Binds and listens on `path` (unlinking a stale file first) and starts the server thread.
  FakeCollector(std::string path, std::shared_ptr<Store> store);
  // Listens on 127.0.0.1 with a kernel-chosen port (see port()).
  explicit FakeCollector(std::shared_ptr<Store> store);
  ~FakeCollector();  // Kill()
  FakeCollector(const FakeCollector&) = delete;
  FakeCollector& operator=(const FakeCollector&) = delete;

  // Stops abruptly: the thread ends, every socket is closed with whatever it still holds unread,
  // nothing more is acked, the socket file is removed. Idempotent.
  void Kill();

  void SetAckMode(AckMode mode);
  // Bytes per read(2): small values make a slow reader.
  void SetReadChunk(size_t bytes);
  // Stops (or resumes) reading every connection; unread data stays in the kernel buffers.
  void SetPaused(bool paused);
  // Writes raw bytes to connection `index` (in accept order).
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
  const std::shared_ptr<Store>& store() const { return store_; }

 private:
  struct Conn {
    int fd = -1;
    bool read_shut = false;
    std::string partial;
    Connection info;
  };
  void Start(int listen_fd);
  void Run();
  void Wake();
  void AcceptAll();
  // Reads once from `c`; false when the connection ended.
  bool ReadOnce(Conn& c);
  void HandleLine(Conn& c, std::string line);

  std::string path_;
  std::shared_ptr<Store> store_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  bool stop_ = false;
  bool killed_ = false;
  AckMode ack_mode_ = AckMode::kAuto;
  size_t read_chunk_ = 64 << 10;
  bool paused_ = false;
  std::vector<std::unique_ptr<Conn>> conns_;
};

}  // namespace cuflight::transport::testing

#endif  // CUFLIGHT_TESTS_TRANSPORT_FAKE_COLLECTOR_H_
