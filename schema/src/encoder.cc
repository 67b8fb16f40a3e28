#include "cuflight/schema/encoder.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <variant>

#include "cuflight/schema/event_fields.h"
#include "digits.h"
#include "validator_bytes.h"

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

using internal::kMaxIntChars;
using internal::WriteDecimal;

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

  // Where the next byte goes; Patch(at, c) sets a byte written since.
  char* pos() const { return p_; }
  void Patch(char* at, char c) {
    if (ok_ && at < p_) *at = c;
  }

  template <class T>
  [[gnu::always_inline]] void Int(T value) {
    static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
    char* out = p_;
    char local[kMaxIntChars];
    const bool direct = static_cast<size_t>(end_ - p_) >= kMaxIntChars;
    if (!direct) out = local;
    char* start = out;
    if constexpr (std::is_signed_v<T>) {
      out = internal::WriteSigned(out, value);
    } else {
      out = WriteDecimal(out, value);
    }
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
  [[gnu::always_inline]] void Fraction(double value) {
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
      const size_t len = internal::Utf8Length(in + i, n - i, &bad);
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

  // A string that needs no escape (an enum's wire name), with its quotes.
  void Quoted(std::string_view s) {
    Char('"');
    Raw(s.data(), s.size());
    Char('"');
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

template <class T>
constexpr bool kIsOptional = false;
template <class T>
constexpr bool kIsOptional<std::optional<T>> = true;

// The members of the tables (event_fields.h), one function per kind; `key` is `,"name":`. An
// unset std::optional is left out (Decode reads an absent member back as nullopt).
#define CUFLIGHT_PUT(kind, T, ...)                                               \
  template <size_t N, class T, class... A>                                       \
  [[gnu::always_inline]] inline void Put##kind(Writer& w, const char(&key)[N], \
                                               const T& v, A... args) {
#define CUFLIGHT_PUT_PLAIN(kind, write) \
  CUFLIGHT_PUT(kind, T)                 \
  ((void)args, ...);                    \
  w.Key(key);                           \
  w.write;                              \
  }
CUFLIGHT_PUT_PLAIN(Int, Int(v))
CUFLIGHT_PUT_PLAIN(OptionalIntOrNull, IntOrNull(v))
CUFLIGHT_PUT_PLAIN(Bool, Bool(v))
CUFLIGHT_PUT_PLAIN(String, String(v))
CUFLIGHT_PUT_PLAIN(OptionalString, String(v))
CUFLIGHT_PUT_PLAIN(Strings, Strings(v))
CUFLIGHT_PUT_PLAIN(OptionalStrings, Strings(v))
CUFLIGHT_PUT_PLAIN(Ids, Ints(v))
CUFLIGHT_PUT_PLAIN(Dim, Dim(v))
CUFLIGHT_PUT_PLAIN(OneResource, ResourceString(v))
CUFLIGHT_PUT_PLAIN(ResourceSet, Resources(v))
CUFLIGHT_PUT_PLAIN(OptionalStringMap, StringMap(v))
CUFLIGHT_PUT_PLAIN(OneLostReason, Quoted(LostReasonName(v)))
CUFLIGHT_PUT_PLAIN(OneStallState, Quoted(StallStateName(v)))

// An std::optional<bool> member unset is not written.
CUFLIGHT_PUT(OptionalBool, T)
  ((void)args, ...);
  if constexpr (kIsOptional<T>) {
    if (!v) return;
    w.Key(key);
    w.Bool(*v);
  } else {
    w.Key(key);
    w.Bool(v);
  }
}

CUFLIGHT_PUT(OptionalInt, T)
  ((void)args, ...);
  if constexpr (kIsOptional<T>) {
    if (v) PutInt(w, key, *v);
  } else {
    PutInt(w, key, v);
  }
}

CUFLIGHT_PUT(IntOrNull, T)
  ((void)args, ...);
  w.Key(key);
  if constexpr (kIsOptional<T>) {
    if (v) return w.Int(*v);
    w.Raw("null", 4);
  } else {
    w.IntOrNull(v);
  }
}

// Numbers in [0, 1] (hi 1) clamped to it; numbers >= 0 (hi kNoMaximum) clamped to >= 0.
CUFLIGHT_PUT(Number, T)
  const double bounds[] = {static_cast<double>(args)...};
  w.Key(key);
  if (bounds[1] == 1) return w.Fraction(v);
  w.NonNegative(v);
}

CUFLIGHT_PUT(OptionalNumber, T)
  if constexpr (kIsOptional<T>) {
    if (v) PutNumber(w, key, *v, args...);
  } else {
    PutNumber(w, key, v, args...);
  }
}

CUFLIGHT_PUT(OptionalDim, T)
  ((void)args, ...);
  if (v) PutDim(w, key, *v);
}

// kUnknown and kNone are not written (Decode reads an absent member as such).
CUFLIGHT_PUT(OptionalOccupancySource, T)
  ((void)args, ...);
  if (v == OccupancySource::kUnknown) return;
  w.Key(key);
  w.Quoted(OccupancySourceName(v));
}

CUFLIGHT_PUT(OptionalTimingStoppedReason, T)
  ((void)args, ...);
  if (v == TimingStoppedReason::kNone) return;
  w.Key(key);
  w.Quoted(TimingStoppedReasonName(v));
}

CUFLIGHT_PUT(OptionalTimingPolicy, T)
  ((void)args, ...);
  if (v == TimingPolicy::kUnknown) return;
  w.Key(key);
  w.Quoted(TimingPolicyName(v));
}

template <class S>
void PutItem(Writer& w, const BasicStallLaunch<S>& e);
template <class S>
void PutItem(Writer& w, const BasicStallStream<S>& e);

// An array of objects, each written by its table: its first member's ',' becomes the '{'.
CUFLIGHT_PUT(Objects, T)
  ((void)args, ...);
  w.Key(key);
  w.Char('[');
  bool first = true;
  for (const auto& item : v) {
    if (!first) w.Char(',');
    first = false;
    char* const open = w.pos();
    PutItem(w, item);
    w.Patch(open, '{');
    w.Char('}');
  }
  w.Char(']');
}
#undef CUFLIGHT_PUT_PLAIN
#undef CUFLIGHT_PUT

// Optional members the encoder writes only when they say something (the others: always).
template <internal::Lit K, class E>
[[gnu::always_inline]] inline bool Writes(const E& e) {
  constexpr std::string_view name = K.view();
  if constexpr (name == "recovered") {
    return e.recovered;
  } else if constexpr (name == "truncated") {
    return !e.truncated.empty();
  } else if constexpr (name == "attribution") {
    return !e.attribution.empty();
  } else if constexpr (name == "pci_bus_id") {
    return !e.pci_bus_id.empty();
  } else if constexpr (name == "cupti_activity_api") {
    return !e.cupti_activity_api.empty();
  } else if constexpr (name == "timing_dropped_stall_flush") {
    return e.timing_dropped_stall_flush != 0;
  } else if constexpr (name == "graph_launch") {
    return e.graph_launch;
  } else if constexpr (name == "evidence") {
    return !e.evidence.empty();
  } else if constexpr (name == "launches_from") {
    return !e.launches_from.empty();
  } else if constexpr (name == "sync_api") {
    return !e.sync_api.empty();
  } else if constexpr (name == "timing_stopped") {  // with its reason
    return e.timing_stopped_reason != TimingStoppedReason::kNone;
  } else if constexpr (name == "timing_windows" || name == "timing_window_ns" ||
                       name == "launches_in_window") {  // the sampled policy's
    return e.timing_policy == TimingPolicy::kSampled;
  } else if constexpr (name == "yields" || name == "yielded_ns" ||
                       name == "launches_yielded") {  // once the process has yielded
    return e.yields != 0;
  } else if constexpr (name == "yielded") {
    return e.yielded;
  } else if constexpr (name == "wave_of_clusters") {
    return e.wave_of_clusters;
  } else if constexpr (name == "cluster_occupancy") {  // only with a cluster
    if constexpr (requires { e.cluster; }) {
      return e.cluster.has_value() && e.occupancy.has_cluster;
    } else {
      return e.has_cluster;
    }
  } else {
    return true;
  }
}

#define CUFLIGHT_ENCODE_FIELD(kind, name, member, ...) \
  if (Writes<#name>(e)) Put##kind(w, ",\"" #name "\":", e.member __VA_OPT__(, ) __VA_ARGS__);
#define CUFLIGHT_ENCODE_RULE(name, trigger)
#define CUFLIGHT_AS_IS(member) member

template <class S>
void PutItem(Writer& w, const BasicStallLaunch<S>& e) {
  CUFLIGHT_SCHEMA_STALL_LAUNCH(CUFLIGHT_ENCODE_FIELD, CUFLIGHT_ENCODE_RULE)
}
template <class S>
void PutItem(Writer& w, const BasicStallStream<S>& e) {
  CUFLIGHT_SCHEMA_STALL_STREAM(CUFLIGHT_ENCODE_FIELD, CUFLIGHT_ENCODE_RULE)
}

template <class S>
size_t EncodeAny(const BasicEvent<S>& event, char* buf, size_t cap) noexcept {
  if (event.valueless_by_exception()) return 0;
  return std::visit([buf, cap](const auto& e) { return Encode(e, buf, cap); }, event);
}

}  // namespace

size_t EncodeOccupancyFields(const OccupancyFields& e, char* buf, size_t cap) noexcept {
  Writer w(buf, cap);
  char* const open = w.pos();
  CUFLIGHT_SCHEMA_OCCUPANCY(CUFLIGHT_ENCODE_FIELD, CUFLIGHT_ENCODE_RULE, CUFLIGHT_AS_IS)
  w.Patch(open, '{');  // the first member's ','
  w.Char('}');
  return w.Finish();
}

// One Encode per table, for both storages.
#define CUFLIGHT_ENCODE(Struct, type_name, TABLE)                                     \
  template <class S>                                                                  \
  size_t Encode(const Struct<S>& e, char* buf, size_t cap) noexcept {                 \
    Writer w(buf, cap);                                                               \
    WriteHeader(w, "{\"type\":\"" type_name "\",\"version\":1,\"ts_ns\":", e.header); \
    TABLE(CUFLIGHT_ENCODE_FIELD, CUFLIGHT_ENCODE_RULE)                                \
    w.Char('}');                                                                      \
    return w.Finish();                                                                \
  }                                                                                   \
  template size_t Encode(const Struct<View>&, char*, size_t) noexcept;                \
  template size_t Encode(const Struct<Owned>&, char*, size_t) noexcept;

CUFLIGHT_ENCODE(BasicProcessStartEvent, "process_start", CUFLIGHT_SCHEMA_PROCESS_START)
CUFLIGHT_ENCODE(BasicDeviceEvent, "device", CUFLIGHT_SCHEMA_DEVICE)
CUFLIGHT_ENCODE(BasicKernelEvent, "kernel", CUFLIGHT_SCHEMA_KERNEL)
CUFLIGHT_ENCODE(BasicKernelTimeEvent, "kernel_time", CUFLIGHT_SCHEMA_KERNEL_TIME)
CUFLIGHT_ENCODE(BasicApiErrorEvent, "api_error", CUFLIGHT_SCHEMA_API_ERROR)
CUFLIGHT_ENCODE(BasicStatsEvent, "stats", CUFLIGHT_SCHEMA_STATS)
CUFLIGHT_ENCODE(BasicProcessEndEvent, "process_end", CUFLIGHT_SCHEMA_PROCESS_END)
CUFLIGHT_ENCODE(BasicProcessLostEvent, "process_lost", CUFLIGHT_SCHEMA_PROCESS_LOST)
CUFLIGHT_ENCODE(BasicProcessCrashEvent, "process_crash", CUFLIGHT_SCHEMA_PROCESS_CRASH)
CUFLIGHT_ENCODE(BasicStallEvent, "stall", CUFLIGHT_SCHEMA_STALL)
CUFLIGHT_ENCODE(BasicKernelConfigEvent, "kernel_config", CUFLIGHT_SCHEMA_KERNEL_CONFIG)
CUFLIGHT_ENCODE(BasicLaunchEvent, "launch", CUFLIGHT_SCHEMA_LAUNCH)

size_t Encode(const Event& event, char* buf, size_t cap) noexcept {
  return EncodeAny(event, buf, cap);
}

size_t Encode(const OwnedEvent& event, char* buf, size_t cap) noexcept {
  return EncodeAny(event, buf, cap);
}

}  // namespace cuflight::schema
