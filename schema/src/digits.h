// Unsigned integers to decimal digits: the encoder's (encoder.cc) and the launch encoder's
// (launch_encoder.cc) one integer writer.
//
// 1. Eight digits at a time, in one 64-bit register (SWAR): a number below 10^8 is split into
//    its four 2-digit groups and those into digits with multiplications by reciprocals, every
//    group at once. The method and its constants are Paul Khuong's ("How to print integers
//    really fast (with Open Source AppNexus code!)", pvk.ca, 2017: encode_ten_thousands):
//    10486 / 2^20 divides each 4-digit half by 100 and 103 / 2^10 each 2-digit group by 10,
//    both exactly over their ranges (x < 10^4 and x < 100). The result holds the most
//    significant digit in its lowest byte, so on a little-endian machine one 8-byte store
//    writes the digits in reading order.
// 2. Leading zeros are the low zero bytes of that register: counted with one count of trailing
//    zero bits and shifted out; the store still writes 8 bytes. So each writer below may write up
//    to kMaxStore bytes at `out` whatever the number's length: its caller must own them (the
//    bytes past the returned end are garbage, written over by what comes next). Numbers of 4
//    digits or fewer, most counts, sizes and dimensions, take a table of digit pairs instead:
//    fewer instructions for them.
// 3. Numbers of more than 8 digits are at most three such pieces (v / 10^16, the 8 digits below,
//    the last 8): a 19-digit nanosecond time is three registers, no loop.
// 4. Little-endian only (x86-64, aarch64: the platforms of cuflight, blackbox/region_layout.h
//    point 5); a big-endian build stops at the static_assert.
#ifndef CUFLIGHT_SCHEMA_SRC_DIGITS_H_
#define CUFLIGHT_SCHEMA_SRC_DIGITS_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cuflight::schema::internal {

static_assert(std::endian::native == std::endian::little, "digits.h, point 4");

// The most bytes a writer below stores at `out` (point 2): 20 digits, or '-' and 19.
inline constexpr size_t kMaxStore = 20;

// The 8 digits of v < 10^8, leading zeros included, as values 0..9, the most significant in the
// lowest byte (point 1).
[[gnu::always_inline]] inline uint64_t DigitBytes8(uint32_t v) {
  const uint64_t merged = uint64_t{v / 10000} | uint64_t{v % 10000} << 32;
  const uint64_t top = ((merged * 10486) >> 20) & ((uint64_t{0x7F} << 32) | 0x7F);
  const uint64_t bot = merged - 100 * top;
  const uint64_t hundreds = (bot << 16) + top;
  uint64_t tens = (hundreds * 103) >> 10;
  tens &= (uint64_t{0xF} << 48) | (uint64_t{0xF} << 32) | (uint64_t{0xF} << 16) | 0xF;
  tens += (hundreds - 10 * tens) << 8;
  return tens;
}

inline constexpr uint64_t kAsciiZeros = 0x3030303030303030;

// Exactly 8 digits of v < 10^8 at out, leading zeros included.
[[gnu::always_inline]] inline void Write8Digits(char* out, uint32_t v) {
  const uint64_t text = DigitBytes8(v) + kAsciiZeros;
  std::memcpy(out, &text, 8);
}

// "00" "01" ... "99".
inline constexpr std::array<char, 200> kDigitPairs = [] {
  std::array<char, 200> pairs{};
  for (int i = 0; i < 100; ++i) {
    pairs[static_cast<size_t>(2 * i)] = static_cast<char>('0' + i / 10);
    pairs[static_cast<size_t>(2 * i + 1)] = static_cast<char>('0' + i % 10);
  }
  return pairs;
}();

[[gnu::always_inline]] inline void Write2Digits(char* out, uint32_t v) {
  std::memcpy(out, &kDigitPairs[2 * v], 2);
}

// The digits of v < 10^8 without leading zeros ("0" for 0) at out; returns their end. Up to 4
// digits (most counts, sizes and dimensions) from a table of digit pairs, storing only the
// digits; from 5 digits on, point 1's register, storing 8 bytes (point 2).
[[gnu::always_inline]] inline char* WriteBelow1e8(char* out, uint32_t v) {
  if (v < 100) {
    if (v < 10) {
      *out = static_cast<char>('0' + v);
      return out + 1;
    }
    Write2Digits(out, v);
    return out + 2;
  }
  if (v < 10000) {
    if (v < 1000) {
      *out = static_cast<char>('0' + v / 100);
      Write2Digits(out + 1, v % 100);
      return out + 3;
    }
    Write2Digits(out, v / 100);
    Write2Digits(out + 2, v % 100);
    return out + 4;
  }
  const uint64_t digits = DigitBytes8(v);
  // Leading zero digits are zero bytes from the lowest up (v >= 10^4: at most 3 of them).
  const int zeros = std::countr_zero(digits) / 8;
  const uint64_t text = (digits >> (8 * zeros)) + kAsciiZeros;
  std::memcpy(out, &text, 8);
  return out + 8 - zeros;
}

// The digits of v (1 to 20 of them) at out; returns their end. Stores at most kMaxStore bytes
// (point 2).
inline char* WriteDecimal(char* out, uint64_t v) {
  constexpr uint64_t k1e8 = 100'000'000;
  constexpr uint64_t k1e16 = k1e8 * k1e8;
  if (v < k1e8) return WriteBelow1e8(out, static_cast<uint32_t>(v));
  if (v < k1e16) {
    out = WriteBelow1e8(out, static_cast<uint32_t>(v / k1e8));
    Write8Digits(out, static_cast<uint32_t>(v % k1e8));
    return out + 8;
  }
  out = WriteBelow1e8(out, static_cast<uint32_t>(v / k1e16));  // at most 4 digits
  Write8Digits(out, static_cast<uint32_t>(v / k1e8 % k1e8));
  Write8Digits(out + 8, static_cast<uint32_t>(v % k1e8));
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
