// What a producer does when the launch ring is full (CUFLIGHT_ON_FULL). Shared by the ring and the
// configuration, so that the configured value is passed to MpscRing::Push unchanged.
#ifndef CUFLIGHT_ENV_ON_FULL_H_
#define CUFLIGHT_ENV_ON_FULL_H_

#include <cstdint>

namespace cuflight::env {

enum class OnFull : uint8_t {
  // The push fails at once and the record is counted as dropped: the application never waits for
  // cuflight. The default.
  kDrop = 0,
  // The push waits until the consumer makes room (spin, then yield, then short sleeps); it fails
  // once the ring is closed, or when the consumer took nothing for the ring's block stall limit
  // (1 s; after that, pushes fail at once until the consumer takes a record again): a stuck
  // consumer never holds the application for longer (ring.h, design point 8).
  kBlock = 1,
};

}  // namespace cuflight::env

#endif  // CUFLIGHT_ENV_ON_FULL_H_
