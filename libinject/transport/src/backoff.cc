#include "backoff.h"

#include <algorithm>

namespace cuflight::transport::internal {

Backoff::Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max,
                 uint64_t seed) noexcept
    : min_(std::max(min, std::chrono::milliseconds(1))),
      max_(std::max(std::chrono::nanoseconds(max), min_)),
      base_(min_),
      state_(seed) {}

std::chrono::nanoseconds Backoff::Next() noexcept {
  const int64_t base = base_.count();
  const int64_t half = base / 2;
  const int64_t jitter =
      static_cast<int64_t>(NextRandom() % static_cast<uint64_t>(base - half + 1));
  base_ = std::min(base_ * 2, max_);
  return std::chrono::nanoseconds(half + jitter);
}

uint64_t Backoff::NextRandom() noexcept {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace cuflight::transport::internal
