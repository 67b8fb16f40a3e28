// Drives a Sender in a test with the real clock: Poll() until a condition holds or a timeout
// passes, waiting (at most 2 ms) in poll(2) on the sender's socket between polls; and gives it
// lines the way the injector does (WriteInPlace).
#ifndef CUFLIGHT_TESTS_TRANSPORT_PUMP_H_
#define CUFLIGHT_TESTS_TRANSPORT_PUMP_H_

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "cuflight/transport/sender.h"

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

}  // namespace cuflight::transport::testing

#endif  // CUFLIGHT_TESTS_TRANSPORT_PUMP_H_
