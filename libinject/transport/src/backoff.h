// Capped exponential backoff with jitter, for reconnect attempts.
//
// The base delay starts at `min` and doubles after each Next() up to `max`; each returned delay
// is drawn uniformly from [base/2, base] ("equal jitter"), so producers that lost the same
// collector at the same moment do not reconnect in lockstep. Deterministic for a given seed.
// Not thread-safe; never allocates or throws.
#ifndef CUFLIGHT_TRANSPORT_SRC_BACKOFF_H_
#define CUFLIGHT_TRANSPORT_SRC_BACKOFF_H_

#include <chrono>
#include <cstdint>

namespace cuflight::transport::internal {

class Backoff {
 public:
  // min and max are clamped to at least 1 ms, and max to at least min.
  Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, uint64_t seed) noexcept;

  // The delay to wait before the next attempt; grows the base for the one after.
  std::chrono::nanoseconds Next() noexcept;
  // Back to the minimum (after a connection that worked).
  void Reset() noexcept { base_ = min_; }
  void Reseed(uint64_t seed) noexcept { state_ = seed; }

  std::chrono::nanoseconds base() const noexcept { return base_; }

 private:
  uint64_t NextRandom() noexcept;  // splitmix64

  std::chrono::nanoseconds min_;
  std::chrono::nanoseconds max_;
  std::chrono::nanoseconds base_;
  uint64_t state_;
};

}  // namespace cuflight::transport::internal

#endif  // CUFLIGHT_TRANSPORT_SRC_BACKOFF_H_
