// Byte-level helpers of the line validator (validator.cc), shared by its general path and its
// expected-order fast path (validator_fast_path.h): little-endian word loads, SWAR decimal digits,
// JSON whitespace, runs of digits and of plain string bytes (SSE2 where there is), and the UTF-8
// well-formedness check. Private to schema/src.
#ifndef CUFLIGHT_SCHEMA_SRC_VALIDATOR_BYTES_H_
#define CUFLIGHT_SCHEMA_SRC_VALIDATOR_BYTES_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace cuflight::schema::internal {

// s[0, 8) as a little-endian word (first byte lowest) on any host. s[0, 8) must be readable.
inline uint64_t Load8(const char* s) {
  uint64_t w;
  std::memcpy(&w, s, 8);
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
  return w;
}

// s[0, 4) as a little-endian word. s[0, 4) must be readable.
inline uint32_t Load4(const char* s) {
  uint32_t w;
  std::memcpy(&w, s, 4);
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap32(w);
  return w;
}

// A string literal as a template argument (`,"name":` and the like).
template <size_t N>
struct Lit {
  // Implicit, so that a literal converts: Name<R"(,"tid":)">().
  constexpr Lit(const char (&s)[N]) {  // NOLINT(google-explicit-constructor)
    for (size_t i = 0; i < N; ++i) text[i] = s[i];
  }
  static constexpr size_t kSize = N - 1;  // without the terminating NUL
  constexpr std::string_view view() const { return {text, kSize}; }

  char text[N];
};

inline bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

// How many of the bytes of w, from the lowest, are ASCII digits before the first that is not (8:
// all). A carry out of a non-digit byte only changes the bytes after it, which do not count.
// SWAR tricks as in simdjson's parse_eight_digits_unrolled.
inline int LeadingDigits(uint64_t w) {
  const uint64_t high = (w & 0xF0F0F0F0F0F0F0F0u) ^ 0x3030303030303030u;
  const uint64_t high6 = ((w + 0x0606060606060606u) & 0xF0F0F0F0F0F0F0F0u) ^ 0x3030303030303030u;
  const uint64_t other = high | high6;  // a nonzero byte: not a digit
  const uint64_t marks =
      (((other & 0x7F7F7F7F7F7F7F7Fu) + 0x7F7F7F7F7F7F7F7Fu) | other) & 0x8080808080808080u;
  if (marks == 0) return 8;
  return __builtin_ctzll(marks) / 8;
}

inline constexpr uint64_t kPow10[] = {1,      10,      100,      1000,     10000,
                                      100000, 1000000, 10000000, 100000000};

// The decimal value of the 8 ASCII digits of w, the first (most significant) in the lowest byte.
inline uint64_t EightDigitsValue(uint64_t w) {
  constexpr uint64_t kMask = 0x000000FF000000FFu;
  constexpr uint64_t kMul1 = 100 + (uint64_t{1000000} << 32);
  constexpr uint64_t kMul2 = 1 + (uint64_t{10000} << 32);
  w -= 0x3030303030303030u;
  w = (w * 10) + (w >> 8);
  return (((w & kMask) * kMul1) + (((w >> 16) & kMask) * kMul2)) >> 32;
}

// The value of the first n (1..7) digits of w, whose first n bytes are ASCII digits: the digits
// moved to the top bytes with '0's below have the same value.
inline uint64_t LeadingDigitsValue(uint64_t w, int n) {
  return EightDigitsValue((w << (8 * (8 - n))) | (0x3030303030303030u >> (8 * n)));
}

inline bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// kStringByte[c]: 0 for a byte copied as is inside a string (0x20..0x7F but '"' and '\\').
inline constexpr std::array<uint8_t, 256> kStringByte = [] {
  std::array<uint8_t, 256> table{};
  for (size_t c = 0; c < 256; ++c) table[c] = (c < 0x20 || c >= 0x80 || c == '"' || c == '\\');
  return table;
}();

#if defined(__SSE2__)
// How many of the bytes p[0, 16), from the first, are ASCII digits (16: all).
[[gnu::always_inline]] inline int DigitRun16(const char* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // '0'..'9' + 0x50 wrap to -128..-119, which no other byte reaches: one signed compare.
  const __m128i digit =
      _mm_cmplt_epi8(_mm_add_epi8(v, _mm_set1_epi8(0x50)), _mm_set1_epi8(static_cast<char>(-118)));
  return __builtin_ctz(~static_cast<unsigned>(_mm_movemask_epi8(digit)));
}
#endif

// Past the ASCII digits at p (none: p). Reads nothing at or past end.
[[gnu::always_inline]] inline const char* SkipDigits(const char* p, const char* end) {
#if defined(__SSE2__)
  while (end - p >= 16) {
    const int n = DigitRun16(p);
    p += n;
    if (n < 16) return p;
  }
#else
  while (end - p >= 8) {
    const int n = LeadingDigits(Load8(p));
    p += n;
    if (n < 8) return p;
  }
#endif
  while (p < end && IsDigit(*p)) ++p;
  return p;
}

// The value of the first n (1..8) digits of w.
inline uint64_t WordDigitsValue(uint64_t w, size_t n) {
  return n == 8 ? EightDigitsValue(w) : LeadingDigitsValue(w, static_cast<int>(n));
}

// The value of the n (1..19) ASCII digits at p. Reads nothing at or past end.
inline uint64_t UintValue(const char* p, size_t n, const char* end) {
  if (end - p >= 24) {
    if (n <= 8) return WordDigitsValue(Load8(p), n);
    if (n <= 16) {
      return EightDigitsValue(Load8(p)) * kPow10[n - 8] + WordDigitsValue(Load8(p + 8), n - 8);
    }
    return (EightDigitsValue(Load8(p)) * 100'000'000 + EightDigitsValue(Load8(p + 8))) *
               kPow10[n - 16] +
           WordDigitsValue(Load8(p + 16), n - 16);
  }
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = v * 10 + static_cast<uint64_t>(p[i] - '0');
  return v;
}

// Past the bytes at p that a JSON string holds as they are (kStringByte 0): to the first quote,
// backslash, control byte or byte >= 0x80, or to end. Reads nothing at or past end.
[[gnu::always_inline]] inline const char* SkipPlainString(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Signed compare: control bytes and every byte >= 0x80 are below 0x20.
    const __m128i special =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmplt_epi8(v, space));
    const int mask = _mm_movemask_epi8(special);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < end && kStringByte[static_cast<unsigned char>(*p)] == 0) ++p;
  return p;
}

// Length (2..4) of the well-formed UTF-8 sequence at s[0] >= 0x80, of the n bytes at s, from
// Table 3-7 of the Unicode standard (as nlohmann checks it). 0 when it is ill-formed, and then
// *bad (when given) is the length of its maximal subpart: the bytes one U+FFFD replaces.
inline size_t Utf8Length(const unsigned char* s, size_t n, size_t* bad = nullptr) {
  size_t ignored;
  if (bad == nullptr) bad = &ignored;
  const unsigned char lead = s[0];
  size_t len;
  unsigned char lo = 0x80;  // range of the second byte
  unsigned char hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    len = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    len = 3;
    if (lead == 0xE0) lo = 0xA0;  // overlong
    if (lead == 0xED) hi = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    len = 4;
    if (lead == 0xF0) lo = 0x90;  // overlong
    if (lead == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    *bad = 1;  // continuation byte, C0/C1 (overlong) or F5..FF
    return 0;
  }
  if (n < 2 || s[1] < lo || s[1] > hi) {
    *bad = 1;
    return 0;
  }
  for (size_t i = 2; i < len; ++i) {
    if (i >= n || (s[i] & 0xC0) != 0x80) {
      *bad = i;
      return 0;
    }
  }
  return len;
}

}  // namespace cuflight::schema::internal

#endif  // CUFLIGHT_SCHEMA_SRC_VALIDATOR_BYTES_H_
