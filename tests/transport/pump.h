// Drives a Sender in a test with the real clock: Poll() until a condition holds or a timeout
// passes, waiting (at most 2 ms) in poll(2) on the sender's socket between polls; and gives it
// lines the way the injector does (WriteInPlace). With it, what the Sender's tests share
// (sender_test.cc, spill_test.cc): the accounting identity of SenderStats and the fixture that
// gives a Sender its options and, on demand, a collector.
#ifndef CUFLIGHT_TESTS_TRANSPORT_PUMP_H_
#define CUFLIGHT_TESTS_TRANSPORT_PUMP_H_

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cuflight/transport/sender.h"
#include "recording_peer.h"
#include "running_collector.h"
#include "temp_dir.h"

namespace cuflight::transport::testing {

inline constexpr std::chrono::seconds kPumpTimeout{20};

// Polls `s` until done() holds (true) or `timeout` passes (false).
template <typename Done>
bool Pump(Sender& s, Done&& done, std::chrono::steady_clock::duration timeout = kPumpTimeout) {
  using std::chrono::steady_clock;
  const auto deadline = steady_clock::now() + timeout;
  for (;;) {
    s.Poll(steady_clock::now());
    if (done()) return true;
    if (steady_clock::now() > deadline) return false;
    if (s.fd() >= 0) {
      pollfd p{s.fd(), static_cast<short>(POLLIN | (s.WantsWrite() ? POLLOUT : 0)), 0};
      (void)poll(&p, 1, 2);
    } else {
      (void)poll(nullptr, 0, 2);
    }
  }
}

// What the injector's sender thread does with each line (sender_thread.cc, Send; sender.h
// design point 13): written into the storage Reserve() offers when it fits there (memcpy stands
// for the encoder) and taken by Commit(), else given to Enqueue(), which copies it. Returns what
// Commit or Enqueue returned; *in_place (when given) says which one ran.
inline bool WriteInPlace(Sender& s, uint64_t seq, std::string_view line,
                         bool* in_place = nullptr) {
  const std::span<char> room = s.Reserve();
  const bool fits = room.size() >= line.size();
  if (in_place != nullptr) *in_place = fits;
  if (!fits) return s.Enqueue(seq, line);
  std::memcpy(room.data(), line.data(), line.size());
  return s.Commit(seq, line.size());
}

// Enqueue()s the lines `first` to `last` that `line(seq)` makes, with a Poll() after each, as
// lines come while the sender runs. False at the first line Enqueue refuses.
template <typename Line>
bool EnqueuePolling(Sender& s, uint64_t first, uint64_t last, Line&& line) {
  for (uint64_t seq = first; seq <= last; ++seq) {
    if (!s.Enqueue(seq, line(seq))) return false;
    s.Poll(std::chrono::steady_clock::now());
  }
  return true;
}

// The accounting identity of SenderStats (sender.h): every line taken is acknowledged, spilled,
// dropped or still held, once.
inline void ExpectStatsBalance(const Sender& s) {
  const SenderStats st = s.stats();
  EXPECT_EQ(st.enqueued + st.preamble_lines, st.acked + st.spilled + st.dropped_disconnected +
                                                 st.dropped_backpressure + s.unacked_lines());
}

// A directory of the test's own, the socket path the Sender connects to (nothing listens there
// until StartCollector) and options for fast tests. The collector at that path is a RecordingPeer
// (what each connection carried, and the faults: held acks, a paused or slow reader, raw bytes,
// a sudden death) relaying to the real collector, which stores, de-duplicates and acknowledges.
// The collector outlives the peers: a peer killed and another started is a collector that died
// and came back with its log. Lines are valid events (StartLine, EventLine) where they reach the
// collector; MakeLine where nothing is stored.
class SenderFixture : public ::testing::Test {
 protected:
  void SetUp() override { path_ = (dir_.path() / "collector.sock").string(); }

  // Options for fast tests: lines due after 1 ms, quick reconnects.
  SenderOptions Options() const {
    SenderOptions o;
    o.socket_path = path_;
    o.flush_interval = std::chrono::milliseconds(1);
    o.backoff_min = std::chrono::milliseconds(1);
    o.backoff_max = std::chrono::milliseconds(20);
    return o;
  }
  // Options() holding at most `buffer_bytes`, `window_bytes` of them sent and not acknowledged.
  SenderOptions Options(size_t buffer_bytes, size_t window_bytes) const {
    SenderOptions o = Options();
    o.buffer_bytes = buffer_bytes;
    o.window_bytes = window_bytes;
    return o;
  }
  // Where the peers relay to: the real collector's socket.
  std::string upstream() const { return (dir_.path() / "store" / "c.sock").string(); }
  // Starts the real collector unless it runs. A reconnect grace longer than any test: a process
  // that comes back continues its stream.
  void StartStoringCollector() {
    if (!collector_) {
      collector_ =
          std::make_unique<test_support::StoringCollector>(upstream(), std::chrono::minutes(10));
    }
  }
  // A peer at path_ in front of the real collector (started here if it was not).
  std::unique_ptr<test_support::RecordingPeer> StartCollector() {
    StartStoringCollector();
    return std::make_unique<test_support::RecordingPeer>(path_, upstream());
  }
  // The seqs the collector stored for this process (none before it was started).
  std::vector<uint64_t> Stored() const {
    return collector_ ? collector_->StoredSeqs(getpid()) : std::vector<uint64_t>{};
  }

  test_support::TempDir dir_;
  std::string path_;
  std::unique_ptr<test_support::StoringCollector> collector_;
};

}  // namespace cuflight::transport::testing

#endif  // CUFLIGHT_TESTS_TRANSPORT_PUMP_H_
