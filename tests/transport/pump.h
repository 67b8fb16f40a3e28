// Drives a Sender in a test with the real clock: Poll() until a condition holds or a timeout
// passes, waiting (at most 2 ms) in poll(2) on the sender's socket between polls.
#ifndef CUFLIGHT_TESTS_TRANSPORT_PUMP_H_
#define CUFLIGHT_TESTS_TRANSPORT_PUMP_H_

#include <poll.h>

#include <chrono>

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

}  // namespace cuflight::transport::testing

#endif  // CUFLIGHT_TESTS_TRANSPORT_PUMP_H_
