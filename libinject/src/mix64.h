// The splitmix64 finaliser: spreads every input bit over the result. The library's lock-free
// tables hash handles (aligned pointers, whose low bits alone are poor) and keys with it.
#ifndef CUFLIGHT_LIBINJECT_SRC_MIX64_H_
#define CUFLIGHT_LIBINJECT_SRC_MIX64_H_

#include <cstdint>

namespace cuflight::inject {

constexpr uint64_t Mix64(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace cuflight::inject

#endif  // CUFLIGHT_LIBINJECT_SRC_MIX64_H_
