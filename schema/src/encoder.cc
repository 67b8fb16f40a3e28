#include "cuflight/schema/encoder.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <variant>

namespace cuflight::schema {
namespace {

static_assert(kSchemaVersion == 1, "the header literals below spell the version");

// kPlain[c]: byte c is copied unchanged inside a JSON string.
constexpr std::array<bool, 256> kPlain = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x7F; ++c) plain[static_cast<size_t>(c)] = c != '"' && c != '\\';
  return plain;
}();

constexpr char kHex[] = "0123456789abcdef";
constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length (2..4) of the well-formed UTF-8 sequence starting at s[0] >= 0x80, from Table 3-7 of
// the Unicode standard. Returns 0 when it is ill-formed and sets *bad to the length of its
// maximal subpart (the bytes one U+FFFD replaces).
size_t Utf8SequenceLength(const unsigned char* s, size_t n, size_t* bad) {
  const unsigned char lead = s[0];
  size_t len = 0;
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

// True when none of the 8 bytes of `w` needs escaping or UTF-8 checking: all in 0x20..0x7E and
// none is '"' or '\\'. Bit tricks from "Bit Twiddling Hacks" (haszero / hasless).
constexpr bool AllPlain(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101;
  constexpr uint64_t kHighs = 0x8080808080808080;
  const uint64_t quote = w ^ (kOnes * '"');
  const uint64_t backslash = w ^ (kOnes * '\\');
  const uint64_t del = w ^ (kOnes * 0x7F);
  const uint64_t special = ((w - kOnes * 0x20) & ~w) | ((quote - kOnes) & ~quote) |
                           ((backslash - kOnes) & ~backslash) | ((del - kOnes) & ~del) | w;
  return (special & kHighs) == 0;
}

// "00" "01" ... "99".
constexpr std::array<char, 200> kDigitPairs = [] {
  std::array<char, 200> pairs{};
  for (int i = 0; i < 100; ++i) {
    pairs[static_cast<size_t>(2 * i)] = static_cast<char>('0' + i / 10);
    pairs[static_cast<size_t>(2 * i + 1)] = static_cast<char>('0' + i % 10);
  }
  return pairs;
}();

void Write2(char* out, uint32_t v) { std::memcpy(out, &kDigitPairs[2 * v], 2); }

// Exactly 4 digits of v < 10^4, or 8 digits of v < 10^8, leading zeros included. The halves are
// independent, which keeps the chain of divisions short: faster than std::to_chars for the
// 14-digit handles every kernel event carries.
void Write4(char* out, uint32_t v) {
  Write2(out, v / 100);
  Write2(out + 2, v % 100);
}
void Write8(char* out, uint32_t v) {
  Write4(out, v / 10000);
  Write4(out + 4, v % 10000);
}

// The digits of v < 10^8 without leading zeros; returns the end.
char* WriteBelow1e8(char* out, uint32_t v) {
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

// The digits of v (1 to 20 of them) at out; returns the end.
char* WriteDecimal(char* out, uint64_t v) {
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
constexpr size_t kMaxIntChars = 20;  // 18446744073709551615, or '-' and 19 digits

// Exact powers of ten (every one up to 1e22 is a double).
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8, 1e9,
                             1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18};
constexpr int64_t kMaxDigits15 = 1'000'000'000'000'000;  // 10^15

// The shortest round-trip decimal digits of `v` when `v` is in [1e-4, 1e15) and has at most 15
// significant digits, which covers ratios such as 3/8 or 21/64. Stores digits and a decimal
// exponent (v == *digits * 10^-*scale) and returns true; returns false otherwise (the caller
// falls back to std::to_chars).
//
// Why the result is exact and shortest: m < 10^15 < 2^53 and 10^p (p <= 18) are exact doubles,
// so m / 10^p is the correctly rounded value of the decimal m * 10^-p, which is what a parser
// returns: the equality test is a true round-trip test. If some decimal of at most 15 digits
// rounds to v, it lies within half an ulp of v, less than a fifth of a unit in the 15th digit, so
// it is the nearest 15-digit decimal; v * 10^p is off by at most 0.11 units, so rounding it finds
// exactly that decimal, and stripping its trailing zeros gives the shortest form.
bool ShortDecimal(double v, int64_t* digits, int* scale) {
  if (!(v >= 1e-4 && v < 1e15)) return false;
  int e = 0;  // about floor(log10(v)); being off by one near a power of ten costs only speed
  if (v >= 1) {
    while (e < 14 && v >= kPow10[e + 1]) ++e;
  } else {
    e = -1;
    while (e > -4 && v * kPow10[-e] < 1) --e;
  }
  int p = 14 - e;  // 0..18
  const auto m = static_cast<int64_t>(v * kPow10[p] + 0.5);
  if (m >= kMaxDigits15 || static_cast<double>(m) / kPow10[p] != v) return false;
  // Strip the trailing zeros (at most 14, as 0 < m < 10^15) in steps of 8, 4, 2 and 1.
  int64_t d = m;
  for (const int step : {8, 4, 2, 1}) {
    const auto unit = static_cast<int64_t>(kPow10[step]);
    if (p >= step && d % unit == 0) {
      d /= unit;
      p -= step;
    }
  }
  *digits = d;
  *scale = p;
  return true;
}

// Appends to buf[0, cap). After the first write that does not fit, every write is a no-op and
// Finish() returns 0.
class Writer {
 public:
  Writer(char* buf, size_t cap) : begin_(buf), p_(buf), end_(buf + cap) {}

  // Ends the line; returns its length, or 0 if anything did not fit.
  size_t Finish() {
    Char('\n');
    return ok_ ? static_cast<size_t>(p_ - begin_) : 0;
  }

  void Raw(const char* s, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return Fail();
    std::memcpy(p_, s, n);
    p_ += n;
  }

  template <size_t N>
  void Key(const char (&key)[N]) {
    Raw(key, N - 1);
  }

  void Char(char c) {
    if (p_ == end_) return Fail();
    *p_++ = c;
  }

  template <class T>
  void Int(T value) {
    static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
    char* out = p_;
    char local[kMaxIntChars];
    const bool direct = static_cast<size_t>(end_ - p_) >= kMaxIntChars;
    if (!direct) out = local;
    char* start = out;
    uint64_t magnitude = static_cast<uint64_t>(value);
    if constexpr (std::is_signed_v<T>) {
      if (value < 0) {
        *out++ = '-';
        magnitude = 0 - magnitude;
      }
    }
    out = WriteDecimal(out, magnitude);
    if (direct) {
      p_ = out;
    } else {
      Raw(start, static_cast<size_t>(out - start));
    }
  }

  // Shortest round-trip form; 0 for NaN and infinities (and for -0).
  void Double(double value) {
    if (value == 0 || !std::isfinite(value)) return Char('0');
    int64_t digits = 0;
    int scale = 0;
    if (value > 0 && ShortDecimal(value, &digits, &scale)) return Fixed(digits, scale);
    const std::to_chars_result r = std::to_chars(p_, end_, value);
    if (r.ec != std::errc()) return Fail();
    p_ = r.ptr;
  }

  // Clamped to [0, 1]; 0 for NaN and infinities.
  void Fraction(double value) {
    if (!(value > 0) || !std::isfinite(value)) return Char('0');
    if (value >= 1) return Char('1');
    Double(value);
  }

  // Negative values as 0; 0 for NaN and infinities.
  void NonNegative(double value) { Double(value > 0 ? value : 0); }

  // null for negative values.
  template <class T>
  void IntOrNull(T value) {
    if (value < 0) return Raw("null", 4);
    Int(value);
  }

  void Dim(const Dim3& d) {
    Char('[');
    Int(d.x);
    Char(',');
    Int(d.y);
    Char(',');
    Int(d.z);
    Char(']');
  }

  void String(std::string_view s) {
    Char('"');
    const auto* in = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
      while (n - i >= 8 && static_cast<size_t>(end_ - p_) >= 8) {
        uint64_t w;
        std::memcpy(&w, in + i, 8);
        if (!AllPlain(w)) break;
        std::memcpy(p_, &w, 8);
        p_ += 8;
        i += 8;
      }
      size_t run = i;
      while (run < n && kPlain[in[run]]) ++run;
      if (run > i) {
        Raw(s.data() + i, run - i);
        i = run;
      }
      if (i == n) break;
      const unsigned char c = in[i];
      if (c < 0x80) {
        Escape(c);
        ++i;
        continue;
      }
      size_t bad = 0;
      const size_t len = Utf8SequenceLength(in + i, n - i, &bad);
      if (len == 0) {
        Raw(kReplacement, 3);
        i += bad;
      } else if (len == 3 && c == 0xE2 && in[i + 1] == 0x80 && (in[i + 2] & 0xFE) == 0xA8) {
        Raw(in[i + 2] == 0xA8 ? "\\u2028" : "\\u2029", 6);
        i += 3;
      } else {
        Raw(s.data() + i, len);
        i += len;
      }
    }
    Char('"');
  }

  template <class List>
  void Strings(const List& list) {
    Char('[');
    bool first = true;
    for (std::string_view s : list) {
      if (!first) Char(',');
      first = false;
      String(s);
    }
    Char(']');
  }

  template <class List>
  void Ints(const List& list) {
    Char('[');
    bool first = true;
    for (uint64_t v : list) {
      if (!first) Char(',');
      first = false;
      Int(v);
    }
    Char(']');
  }

  // An object of string members, in the order given.
  template <class Map>
  void StringMap(const Map& map) {
    Char('{');
    bool first = true;
    for (const auto& [key, value] : map) {
      if (!first) Char(',');
      first = false;
      String(key);
      Char(':');
      String(value);
    }
    Char('}');
  }

  void Bool(bool value) {
    if (value) return Raw("true", 4);
    Raw("false", 5);
  }

  void Resources(ResourceMask mask) {
    Char('[');
    bool first = true;
    for (int i = 0; i < kResourceCount; ++i) {
      if ((mask & MaskOf(static_cast<Resource>(i))) == 0) continue;
      if (!first) Char(',');
      first = false;
      Char('"');
      const std::string_view name = ResourceName(static_cast<Resource>(i));
      Raw(name.data(), name.size());
      Char('"');
    }
    Char(']');
  }

  void ResourceString(Resource r) {
    Char('"');
    const std::string_view name = ResourceName(r);
    Raw(name.data(), name.size());
    Char('"');
  }

 private:
  void Fail() {
    ok_ = false;
    end_ = p_;
  }

  // digits * 10^-scale in plain decimal notation; digits > 0, scale 0..18.
  void Fixed(int64_t digits, int scale) {
    char text[kMaxIntChars];
    const auto len = static_cast<int>(WriteDecimal(text, static_cast<uint64_t>(digits)) - text);
    if (scale == 0) return Raw(text, static_cast<size_t>(len));
    if (len > scale) {
      Raw(text, static_cast<size_t>(len - scale));
      Char('.');
      return Raw(text + len - scale, static_cast<size_t>(scale));
    }
    Raw("0.000000000000000000", static_cast<size_t>(2 + scale - len));
    Raw(text, static_cast<size_t>(len));
  }

  // c < 0x80 and not plain.
  void Escape(unsigned char c) {
    switch (c) {
      case '"':
        return Raw("\\\"", 2);
      case '\\':
        return Raw("\\\\", 2);
      case '\b':
        return Raw("\\b", 2);
      case '\f':
        return Raw("\\f", 2);
      case '\n':
        return Raw("\\n", 2);
      case '\r':
        return Raw("\\r", 2);
      case '\t':
        return Raw("\\t", 2);
      default: {
        const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        return Raw(u, sizeof(u));
      }
    }
  }

  char* begin_;
  char* p_;
  char* end_;
  bool ok_ = true;
};

// `open` is the object's start up to the ts_ns value: {"type":"...","version":1,"ts_ns":
template <size_t N>
void WriteHeader(Writer& w, const char (&open)[N], const Header& h) {
  w.Key(open);
  w.Int(h.ts_ns);
  w.Key(R"(,"pid":)");
  w.Int(h.pid);
  w.Key(R"(,"seq":)");
  w.Int(h.seq);
}

void WriteOccupancy(Writer& w, const OccupancyFields& o, bool cluster) {
  w.Key(R"(,"max_active_blocks":)");
  w.Int(o.max_active_blocks);
  w.Key(R"(,"active_warps":)");
  w.Int(o.active_warps);
  w.Key(R"(,"max_warps":)");
  w.Int(o.max_warps);
  w.Key(R"(,"occupancy":)");
  w.Fraction(o.occupancy);
  w.Key(R"(,"reg_occupancy":)");
  w.Fraction(o.reg_occupancy);
  w.Key(R"(,"smem_occupancy":)");
  w.Fraction(o.smem_occupancy);
  w.Key(R"(,"warp_occupancy":)");
  w.Fraction(o.warp_occupancy);
  w.Key(R"(,"block_occupancy":)");
  w.Fraction(o.block_occupancy);
  w.Key(R"(,"barrier_occupancy":)");
  w.Fraction(o.barrier_occupancy);
  if (cluster && o.has_cluster) {
    w.Key(R"(,"cluster_occupancy":)");
    w.Fraction(o.cluster_occupancy);
  }
  w.Key(R"(,"limiting_resource":)");
  w.ResourceString(o.limiting_resource);
  w.Key(R"(,"limiting_resources":)");
  w.Resources(o.limiting_resources);
  w.Key(R"(,"allocated_regs_per_block":)");
  w.Int(o.allocated_regs_per_block);
  w.Key(R"(,"allocated_smem_per_block":)");
  w.Int(o.allocated_smem_per_block);
  w.Key(R"(,"waves":)");
  w.NonNegative(o.waves);
  w.Key(R"(,"tail_utilization":)");
  w.Fraction(o.tail_utilization);
  w.Key(R"(,"regs_for_next_block":)");
  w.IntOrNull(o.regs_for_next_block);
  w.Key(R"(,"smem_for_next_block":)");
  w.IntOrNull(o.smem_for_next_block);
  w.Key(R"(,"best_block_size":)");
  w.Int(o.best_block_size);
}

// The launch and drop counters stats, process_end and process_crash share, after `dropped`.
template <class E>
void WriteLaunchCounters(Writer& w, const E& e) {
  w.Key(R"(,"launches":)");
  w.Int(e.launches);
  w.Key(R"(,"filtered":)");
  w.Int(e.filtered);
  w.Key(R"(,"dropped_ring_full":)");
  w.Int(e.dropped_ring_full);
  w.Key(R"(,"dropped_disconnected":)");
  w.Int(e.dropped_disconnected);
  w.Key(R"(,"dropped_backpressure":)");
  w.Int(e.dropped_backpressure);
  w.Key(R"(,"timing_dropped":)");
  w.Int(e.timing_dropped);
  w.Key(R"(,"occupancy_disagreements":)");
  w.Int(e.occupancy_disagreements);
  w.Key(R"(,"api_errors_routine":)");
  w.Int(e.api_errors_routine);
  w.Key(R"(,"api_errors_suppressed":)");
  w.Int(e.api_errors_suppressed);
  if (e.timing_stopped_reason != TimingStoppedReason::kNone) {
    w.Key(R"(,"timing_stopped":)");
    w.Int(e.timing_stopped);
    if (e.timing_stopped_reason == TimingStoppedReason::kRecordsStopped) {
      w.Key(R"(,"timing_stopped_reason":"records_stopped")");
    } else {
      w.Key(R"(,"timing_stopped_reason":"unavailable")");
    }
  }
}

template <class S>
size_t EncodeAny(const BasicEvent<S>& event, char* buf, size_t cap) noexcept {
  if (event.valueless_by_exception()) return 0;
  return std::visit([buf, cap](const auto& e) { return Encode(e, buf, cap); }, event);
}

}  // namespace

size_t EncodeOccupancyFields(const OccupancyFields& o, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  w.Char('{');
  WriteOccupancy(w, o, /*cluster=*/true);  // starts with ',' after the '{'
  w.Char('}');
  const size_t n = w.Finish();
  if (n < 3) return 0;
  std::memmove(buf + 1, buf + 2, n - 2);  // drop the leading ','
  return n - 1;
}

template <class S>
size_t Encode(const BasicProcessStartEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"process_start","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"exe":)");
  w.String(e.exe);
  w.Key(R"(,"argv":)");
  w.Strings(e.argv);
  w.Key(R"(,"hostname":)");
  w.String(e.hostname);
  w.Key(R"(,"start_ns":)");
  w.Int(e.start_ns);
  w.Key(R"(,"cuflight_version":)");
  w.String(e.cuflight_version);
  w.Key(R"(,"cuda_driver_version":)");
  w.Int(e.cuda_driver_version);
  w.Key(R"(,"cupti_version":)");
  w.Int(e.cupti_version);
  w.Key(R"(,"ppid":)");
  w.Int(e.ppid);
  w.Key(R"(,"uid":)");
  w.IntOrNull(e.uid);
  w.Key(R"(,"config":)");
  w.StringMap(e.config);
  w.Key(R"(,"instance_id":)");
  w.Int(e.instance_id);
  w.Key(R"(,"pid_ns":)");
  w.Int(e.pid_ns);
  if (!e.truncated.empty()) {
    w.Key(R"(,"truncated":)");
    w.Strings(e.truncated);
  }
  w.Char('}');
  return w.Finish();
}

template <class S>
size_t Encode(const BasicDeviceEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"device","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"device":)");
  w.Int(e.device);
  w.Key(R"(,"name":)");
  w.String(e.name);
  w.Key(R"(,"uuid":)");
  w.String(e.uuid);
  w.Key(R"(,"cc_major":)");
  w.Int(e.cc_major);
  w.Key(R"(,"cc_minor":)");
  w.Int(e.cc_minor);
  w.Key(R"(,"sm_count":)");
  w.Int(e.sm_count);
  w.Key(R"(,"max_threads_per_block":)");
  w.Int(e.max_threads_per_block);
  w.Key(R"(,"max_threads_per_sm":)");
  w.Int(e.max_threads_per_sm);
  w.Key(R"(,"max_blocks_per_sm":)");
  w.Int(e.max_blocks_per_sm);
  w.Key(R"(,"regs_per_sm":)");
  w.Int(e.regs_per_sm);
  w.Key(R"(,"regs_per_block":)");
  w.Int(e.regs_per_block);
  w.Key(R"(,"smem_per_sm":)");
  w.Int(e.smem_per_sm);
  w.Key(R"(,"smem_per_block":)");
  w.Int(e.smem_per_block);
  w.Key(R"(,"smem_per_block_optin":)");
  w.Int(e.smem_per_block_optin);
  w.Key(R"(,"reserved_smem_per_block":)");
  w.Int(e.reserved_smem_per_block);
  w.Key(R"(,"warp_size":)");
  w.Int(e.warp_size);
  w.Key(R"(,"max_cluster_size":)");
  w.Int(e.max_cluster_size);
  if (e.recovered) w.Key(R"(,"recovered":true)");
  w.Char('}');
  return w.Finish();
}

template <class S>
size_t Encode(const BasicKernelEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"kernel","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"tid":)");
  w.Int(e.tid);
  w.Key(R"(,"device":)");
  w.Int(e.device);
  w.Key(R"(,"context":)");
  w.Int(e.context);
  w.Key(R"(,"stream":)");
  w.Int(e.stream);
  w.Key(R"(,"correlation_id":)");
  w.Int(e.correlation_id);
  w.Key(R"(,"api":)");
  w.String(e.api);
  w.Key(R"(,"name":)");
  w.String(e.name);
  w.Key(R"(,"demangled":)");
  w.String(e.demangled);
  w.Key(R"(,"grid":)");
  w.Dim(e.grid);
  w.Key(R"(,"block":)");
  w.Dim(e.block);
  if (e.cluster) {
    w.Key(R"(,"cluster":)");
    w.Dim(*e.cluster);
  }
  w.Key(R"(,"num_regs":)");
  w.Int(e.num_regs);
  w.Key(R"(,"static_shared_bytes":)");
  w.Int(e.static_shared_bytes);
  w.Key(R"(,"dyn_shared_bytes":)");
  w.Int(e.dyn_shared_bytes);
  w.Key(R"(,"local_bytes":)");
  w.Int(e.local_bytes);
  w.Key(R"(,"const_bytes":)");
  w.Int(e.const_bytes);
  w.Key(R"(,"max_threads_per_block":)");
  w.Int(e.max_threads_per_block);
  w.Key(R"(,"carveout":)");
  w.Int(e.carveout);
  w.Key(R"(,"cooperative":)");
  w.Bool(e.cooperative);
  if (e.graph_id) {
    w.Key(R"(,"graph_id":)");
    w.Int(*e.graph_id);
  }
  if (e.graph_node_id) {
    w.Key(R"(,"graph_node_id":)");
    w.Int(*e.graph_node_id);
  }
  WriteOccupancy(w, e.occupancy, e.cluster.has_value());
  if (e.occupancy_source != OccupancySource::kUnknown) {
    w.Key(e.occupancy_source == OccupancySource::kDriver ? R"(,"occupancy_source":"driver")"
                                                         : R"(,"occupancy_source":"engine")");
  }
  if (e.engine_max_active_blocks) {
    w.Key(R"(,"engine_max_active_blocks":)");
    w.Int(*e.engine_max_active_blocks);
  }
  if (e.recovered) w.Key(R"(,"recovered":true)");
  w.Char('}');
  return w.Finish();
}

template <class S>
size_t Encode(const BasicKernelTimeEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"kernel_time","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"correlation_id":)");
  w.Int(e.correlation_id);
  w.Key(R"(,"device":)");
  w.Int(e.device);
  w.Key(R"(,"context":)");
  w.Int(e.context);
  w.Key(R"(,"stream":)");
  w.Int(e.stream);
  w.Key(R"(,"start_ns":)");
  w.Int(e.start_ns);
  w.Key(R"(,"end_ns":)");
  w.Int(e.end_ns);
  w.Key(R"(,"duration_ns":)");
  w.Int(e.duration_ns);
  if (e.graph_id) {
    w.Key(R"(,"graph_id":)");
    w.Int(*e.graph_id);
  }
  if (e.graph_node_id) {
    w.Key(R"(,"graph_node_id":)");
    w.Int(*e.graph_node_id);
  }
  w.Char('}');
  return w.Finish();
}

template <class S>
size_t Encode(const BasicApiErrorEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"api_error","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"api":)");
  w.String(e.api);
  w.Key(R"(,"code":)");
  w.Int(e.code);
  w.Key(R"(,"error_name":)");
  w.String(e.error_name);
  w.Key(R"(,"message":)");
  w.String(e.message);
  w.Key(R"(,"device":)");
  w.Int(e.device);
  w.Key(R"(,"context":)");
  w.Int(e.context);
  w.Key(R"(,"stream":)");
  w.Int(e.stream);
  w.Key(R"(,"last_correlation_ids":)");
  w.Ints(e.last_correlation_ids);
  w.Char('}');
  return w.Finish();
}

template <class S>
size_t Encode(const BasicStatsEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"stats","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"emitted":)");
  w.Int(e.emitted);
  w.Key(R"(,"dropped":)");
  w.Int(e.dropped);
  w.Key(R"(,"ring_capacity":)");
  w.Int(e.ring_capacity);
  w.Key(R"(,"interval_ns":)");
  w.Int(e.interval_ns);
  WriteLaunchCounters(w, e);
  w.Key(R"(,"ring_high_water":)");
  w.Int(e.ring_high_water);
  w.Key(R"(,"cpu_ns":)");
  w.Int(e.cpu_ns);
  w.Char('}');
  return w.Finish();
}

template <class S>
size_t Encode(const BasicProcessEndEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"process_end","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"exit_code":)");
  if (e.exit_code) {
    w.Int(*e.exit_code);
  } else {
    w.Key("null");
  }
  w.Key(R"(,"emitted":)");
  w.Int(e.emitted);
  w.Key(R"(,"dropped":)");
  w.Int(e.dropped);
  WriteLaunchCounters(w, e);
  w.Char('}');
  return w.Finish();
}

template <class S>
size_t Encode(const BasicProcessLostEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"process_lost","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"last_seq":)");
  if (e.last_seq) {
    w.Int(*e.last_seq);
  } else {
    w.Key("null");
  }
  w.Key(R"(,"reason":)");
  w.Char('"');
  const std::string_view reason = LostReasonName(e.reason);
  w.Raw(reason.data(), reason.size());
  w.Char('"');
  w.Key(R"(,"events_stored":)");
  w.Int(e.events_stored);
  w.Key(R"(,"events_lost":)");
  w.Int(e.events_lost);
  if (e.events_recovered) {
    w.Key(R"(,"events_recovered":)");
    w.Int(*e.events_recovered);
  }
  w.Char('}');
  return w.Finish();
}

template <class S>
size_t Encode(const BasicProcessCrashEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"process_crash","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"signal":)");
  w.Int(e.signal);
  w.Key(R"(,"signal_name":)");
  w.String(e.signal_name);
  w.Key(R"(,"code":)");
  w.Int(e.code);
  w.Key(R"(,"addr":)");
  w.Int(e.addr);
  w.Key(R"(,"tid":)");
  w.Int(e.tid);
  if (e.app_handler) {
    w.Key(R"(,"app_handler":true)");
  } else {
    w.Key(R"(,"app_handler":false)");
  }
  w.Key(R"(,"emitted":)");
  w.Int(e.emitted);
  w.Key(R"(,"dropped":)");
  w.Int(e.dropped);
  WriteLaunchCounters(w, e);
  w.Char('}');
  return w.Finish();
}

template <class S>
size_t Encode(const BasicStallEvent<S>& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  WriteHeader(w, R"({"type":"stall","version":1,"ts_ns":)", e.header);
  w.Key(R"(,"state":)");
  w.Char('"');
  const std::string_view state = StallStateName(e.state);
  w.Raw(state.data(), state.size());
  w.Char('"');
  w.Key(R"(,"stall_ms":)");
  w.Int(e.stall_ms);
  w.Key(R"(,"stalled_ms":)");
  w.Int(e.stalled_ms);
  w.Key(R"(,"completed":)");
  w.Int(e.completed);
  w.Key(R"(,"streams_stalled":)");
  w.Int(e.streams_stalled);
  w.Key(R"(,"streams":[)");
  bool first_stream = true;
  for (const BasicStallStream<S>& s : e.streams) {
    if (!first_stream) w.Char(',');
    first_stream = false;
    w.Key(R"({"device":)");
    w.Int(s.device);
    w.Key(R"(,"context":)");
    w.Int(s.context);
    w.Key(R"(,"stream":)");
    w.Int(s.stream);
    w.Key(R"(,"waiting_ms":)");
    w.Int(s.waiting_ms);
    w.Key(R"(,"unfinished":)");
    w.Int(s.unfinished);
    w.Key(R"(,"launches":[)");
    bool first_launch = true;
    for (const BasicStallLaunch<S>& l : s.launches) {
      if (!first_launch) w.Char(',');
      first_launch = false;
      w.Key(R"({"correlation_id":)");
      w.Int(l.correlation_id);
      w.Key(R"(,"name":)");
      w.String(l.name);
      w.Key(R"(,"demangled":)");
      w.String(l.demangled);
      w.Key(R"(,"grid":)");
      w.Dim(l.grid);
      w.Key(R"(,"block":)");
      w.Dim(l.block);
      w.Key(R"(,"occupancy":)");
      w.Fraction(l.occupancy);
      w.Key(R"(,"age_ms":)");
      w.Int(l.age_ms);
      w.Char('}');
    }
    w.Key("]}");
  }
  w.Key("]}");
  return w.Finish();
}

size_t Encode(const Event& event, char* buf, size_t cap) noexcept {
  return EncodeAny(event, buf, cap);
}

size_t Encode(const OwnedEvent& event, char* buf, size_t cap) noexcept {
  return EncodeAny(event, buf, cap);
}

template size_t Encode(const BasicProcessStartEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicProcessStartEvent<Owned>&, char*, size_t) noexcept;
template size_t Encode(const BasicDeviceEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicDeviceEvent<Owned>&, char*, size_t) noexcept;
template size_t Encode(const BasicKernelEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicKernelEvent<Owned>&, char*, size_t) noexcept;
template size_t Encode(const BasicKernelTimeEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicKernelTimeEvent<Owned>&, char*, size_t) noexcept;
template size_t Encode(const BasicApiErrorEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicApiErrorEvent<Owned>&, char*, size_t) noexcept;
template size_t Encode(const BasicStatsEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicStatsEvent<Owned>&, char*, size_t) noexcept;
template size_t Encode(const BasicProcessEndEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicProcessEndEvent<Owned>&, char*, size_t) noexcept;
template size_t Encode(const BasicProcessLostEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicProcessLostEvent<Owned>&, char*, size_t) noexcept;
template size_t Encode(const BasicProcessCrashEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicProcessCrashEvent<Owned>&, char*, size_t) noexcept;
template size_t Encode(const BasicStallEvent<View>&, char*, size_t) noexcept;
template size_t Encode(const BasicStallEvent<Owned>&, char*, size_t) noexcept;

}  // namespace cuflight::schema
