// Unsigned integers to decimal digits: the encoder's (encoder.cc) and the launch encoder's
// (launch_encoder.cc) one integer writer.
//
// 1. Two digits at a time from a table of the pairs "00".."99": the branches on a number's
//    length are predicted line after line (a producer's numbers keep their lengths), and each
//    pair is one load and one 2-byte store. Only the digits are written.
// 2. Numbers of 5 to 8 digits split at 10^4, numbers of 9 and more at 10^8 and 10^16, so that
//    the divisions' chains stay short: faster than std::to_chars for the 14-digit handles every
//    kernel event carries, and for a 19-digit nanosecond time.
// 3. Tried and not taken (docs/performance.md, 2026-11-29): eight digits at a time in a 64-bit
//    register (SWAR, Paul Khuong's encode_ten_thousands) executes fewer instructions for 5 to 8
//    digits but took 19.5 ns per `launch` line against 16.4 with the pairs.
#ifndef CUFLIGHT_SCHEMA_SRC_DIGITS_H_
#define CUFLIGHT_SCHEMA_SRC_DIGITS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cuflight::schema::internal {

// The most digits a number has: 20 (18446744073709551615), or '-' and 19.
inline constexpr size_t kMaxIntChars = 20;

// "00" "01" ... "99".
inline constexpr std::array<char, 200> kDigitPairs = [] {
  std::array<char, 200> pairs{};
  for (int i = 0; i < 100; ++i) {
    pairs[static_cast<size_t>(2 * i)] = static_cast<char>('0' + i / 10);
    pairs[static_cast<size_t>(2 * i + 1)] = static_cast<char>('0' + i % 10);
  }
  return pairs;
}();

inline void Write2(char* out, uint32_t v) { std::memcpy(out, &kDigitPairs[2 * v], 2); }

// Exactly 4 digits of v < 10^4, or 8 digits of v < 10^8, leading zeros included. The halves are
// independent, which keeps the chain of divisions short.
inline void Write4(char* out, uint32_t v) {
  Write2(out, v / 100);
  Write2(out + 2, v % 100);
}
inline void Write8(char* out, uint32_t v) {
  Write4(out, v / 10000);
  Write4(out + 4, v % 10000);
}

// The digits of v < 10^8 without leading zeros ("0" for 0) at out; returns their end.
inline char* WriteBelow1e8(char* out, uint32_t v) {
  if (v < 100) {
    if (v < 10) {
      *out = static_cast<char>('0' + v);
      return out + 1;
    }
    Write2(out, v);
    return out + 2;
  }
  if (v < 10000) {
    if (v < 1000) {
      *out = static_cast<char>('0' + v / 100);
      Write2(out + 1, v % 100);
      return out + 3;
    }
    Write4(out, v);
    return out + 4;
  }
  out = WriteBelow1e8(out, v / 10000);
  Write4(out, v % 10000);
  return out + 4;
}

// The digits of v (1 to 20 of them) at out; returns their end.
inline char* WriteDecimal(char* out, uint64_t v) {
  constexpr uint64_t k1e8 = 100'000'000;
  constexpr uint64_t k1e16 = k1e8 * k1e8;
  if (v < k1e8) return WriteBelow1e8(out, static_cast<uint32_t>(v));
  if (v < k1e16) {
    out = WriteBelow1e8(out, static_cast<uint32_t>(v / k1e8));
    Write8(out, static_cast<uint32_t>(v % k1e8));
    return out + 8;
  }
  out = WriteBelow1e8(out, static_cast<uint32_t>(v / k1e16));
  Write8(out, static_cast<uint32_t>(v / k1e8 % k1e8));
  Write8(out + 8, static_cast<uint32_t>(v % k1e8));
  return out + 16;
}

// The same for a signed v: '-' first when negative.
template <class T>
inline char* WriteSigned(char* out, T v) {
  uint64_t magnitude = static_cast<uint64_t>(v);
  if (v < 0) {
    *out++ = '-';
    magnitude = 0 - magnitude;
  }
  return WriteDecimal(out, magnitude);
}

}  // namespace cuflight::schema::internal

#endif  // CUFLIGHT_SCHEMA_SRC_DIGITS_H_
