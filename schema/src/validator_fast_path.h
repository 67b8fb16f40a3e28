// Expected-order fast path of the line validator (schema::Validate, validator.cc), for the
// high-rate event types: kernel, kernel_time and launch (every other type is at most a few lines a
// second per process, and goes to the general path).
//
// 1. The encoder (encoder.cc) writes every event's members in the order of its table
//    (event_fields.h), with no whitespace. The walk of each type is generated from that table:
//    every required member where the table puts it, each optional one there or left out, then the
//    table's dependentRequired rules on what was there. AcceptEncoderLayout walks a line expecting
//    exactly that layout: it compares the bytes of each member name, with the ',' before it, its
//    quotes and the ':' after it, against the table's as whole words (no hashing, no lookup), then
//    parses and range-checks the value in place.
// 2. It only accepts. True means the general path accepts the line too and would fill LineInfo
//    exactly as it was filled here. On any surprise (another type, order or spacing, a missing,
//    unknown or repeated member, a byte order mark, an escape or a control byte in a string, a
//    number outside the plain shapes below, a value out of range) it returns false having decided
//    nothing, and the general path gives the verdict and the message.
// 3. Value shapes it accepts: integers as digits (at most 19, no leading zero), with a '-' only
//    where the range has negatives (and not "-0"); numbers in [0, 1] as 0, 1 or 0.ddd; other
//    numbers >= 0 as digits with an optional .ddd (no exponent); strings without escapes or
//    control bytes, with well-formed UTF-8; arrays of those, without whitespace. The validator
//    tests and the fuzzer (tests/fuzz/) check that each is accepted exactly when the general path
//    accepts it.
// 4. Cost: every member is a few word compares and one or two 16-byte loads. Far from the line's
//    end (kRoom bytes), an integer member is read without per-load bounds checks; near the end,
//    and for the other value kinds, every read is checked against the end of the line. With
//    SSE2 (every x86-64); elsewhere the same checks run on 8-byte words.
// 5. The walks are templates over where values go: nowhere (Validate), or the members of an
//    OwnedKernelEvent, OwnedKernelTimeEvent or OwnedLaunchEvent (DecodeEncoderLayout, for LineDecoder): integers
//    are written as they are checked, the other values converted from the text just checked.
// 6. Header-only, included by validator.cc alone (scripts/fuzz compiles validator.cc with the other
//    schema sources, so the fast path stays in that translation unit). No allocation, no state.
#ifndef CUFLIGHT_SCHEMA_SRC_VALIDATOR_FAST_PATH_H_
#define CUFLIGHT_SCHEMA_SRC_VALIDATOR_FAST_PATH_H_

#include <cstddef>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string_view>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cuflight/schema/event_fields.h"
#include "cuflight/schema/events.h"
#include "cuflight/schema/occupancy_fields.h"
#include "cuflight/schema/validator.h"
#include "validator_bytes.h"

namespace cuflight::schema::internal::fast_path {

// ---------------------------------------------------------------------------------------------
// Literals compared as words.

// Little-endian value of L.text[at, at + width), width <= 8.
template <Lit L>
constexpr uint64_t LitWord(size_t at, size_t width) {
  uint64_t w = 0;
  for (size_t i = 0; i < width; ++i) {
    w |= uint64_t{static_cast<unsigned char>(L.text[at + i])} << (8 * i);
  }
  return w;
}

// Whether L.text[at, ...) starts with `s`.
template <Lit L>
constexpr bool LitHas(size_t at, std::string_view s) {
  if (at + s.size() > L.kSize) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (L.text[at + i] != s[i]) return false;
  }
  return true;
}

// Offset of the i-th 8-byte word covering a literal of n >= 8 bytes: the last one overlaps its
// neighbour so that no byte past the literal is read.
constexpr size_t WordOffset(size_t i, size_t n) { return 8 * i + 8 <= n ? 8 * i : n - 8; }

// Whether p[0, L.kSize) holds L. p[0, L.kSize) must be readable; nothing past it is read.
template <Lit L>
[[gnu::always_inline]] inline bool Matches(const char* p) {
  constexpr size_t n = L.kSize;
  static_assert(n >= 4, "two 4-byte loads cover the shortest literal");
  if constexpr (n < 8) {
    return ((Load4(p) ^ LitWord<L>(0, 4)) | (Load4(p + n - 4) ^ LitWord<L>(n - 4, 4))) == 0;
  } else {
    uint64_t diff = 0;
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((diff |= Load8(p + WordOffset(I, n)) ^ LitWord<L>(WordOffset(I, n), 8)), ...);
    }(std::make_index_sequence<(n + 7) / 8>{});
    return diff == 0;
  }
}

#if defined(__SSE2__)
// L's bytes, zero-padded to 32 (as vector operands).
template <Lit L>
inline constexpr auto kPadded = [] {
  static_assert(L.kSize <= 32);
  struct alignas(16) {
    char bytes[32];
  } padded{};
  for (size_t i = 0; i < L.kSize; ++i) padded.bytes[i] = L.text[i];
  return padded;
}();

// How many bytes MatchesWide reads.
template <Lit L>
inline constexpr size_t kWideSize = L.kSize < 16 ? 16 : L.kSize;

// Whether p[0, L.kSize) holds L, with 16-byte compares. p[0, kWideSize<L>) must be readable.
template <Lit L>
[[gnu::always_inline]] inline bool MatchesWide(const char* p) {
  constexpr size_t n = L.kSize;
  const auto* lit = kPadded<L>.bytes;
  const __m128i head = _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)),
                                      _mm_load_si128(reinterpret_cast<const __m128i*>(lit)));
  if constexpr (n <= 16) {
    constexpr unsigned kMask = (1u << n) - 1;
    return (static_cast<unsigned>(_mm_movemask_epi8(head)) & kMask) == kMask;
  } else {
    // The last 16 bytes overlap the first 16 when n < 32.
    const __m128i tail =
        _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + n - 16)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(lit + n - 16)));
    return _mm_movemask_epi8(_mm_and_si128(head, tail)) == 0xFFFF;
  }
}
#endif

// Whether p[0, L.kSize) holds L, reading nothing at or past end.
template <Lit L>
[[gnu::always_inline]] inline bool MatchesBefore(const char* p, const char* end) {
#if defined(__SSE2__)
  if constexpr (L.kSize <= 32) {
    if (end - p >= static_cast<ptrdiff_t>(kWideSize<L>)) return MatchesWide<L>(p);
  }
#endif
  return end - p >= static_cast<ptrdiff_t>(L.kSize) && Matches<L>(p);
}

// ---------------------------------------------------------------------------------------------
// Values.

// An integer range of the schema (event_fields.h), as the checks below use it.
struct Bounds {
  constexpr Bounds(const IntRange& r)  // NOLINT(google-explicit-constructor): ranges convert
      : max(r.hi),
        negative_max(r.lo < 0 ? 0 - static_cast<uint64_t>(r.lo) : 0),
        min(r.lo > 0 ? static_cast<uint64_t>(r.lo) : 0) {}

  uint64_t max;           // the largest value
  uint64_t negative_max;  // the largest magnitude of a negative value; 0: none
  uint64_t min;           // the smallest value, when not negative
};

// Whether the unchecked ("roomy") forms below can be used: 16-byte loads, hence SSE2.
#if defined(__SSE2__)
inline constexpr bool kHaveRoomy = true;
#else
inline constexpr bool kHaveRoomy = false;
#endif

// How many bytes past a value's start the roomy forms may read.
inline constexpr ptrdiff_t kRoom = 64;

// The end of the plain unsigned integer at p: 1 to 19 digits (so its value fits in 64 bits), no
// leading zero; nullptr when there is none such. Reads nothing at or past end; kRoomy: p[0, 32)
// must be readable.
template <bool kRoomy = false>
[[gnu::always_inline]] inline const char* UintEnd(const char* p, const char* end) {
  const char* q;
#if defined(__SSE2__)
  if constexpr (kRoomy) {
    int run = DigitRun16(p);
    if (run == 16) run += DigitRun16(p + 16);
    q = p + run;
  } else {
    q = SkipDigits(p, end);
  }
#else
  q = SkipDigits(p, end);
#endif
  const auto n = static_cast<size_t>(q - p);
  if (n - 1 >= 19 || (*p == '0' && n > 1)) return nullptr;
  return q;
}

// How many decimal digits v has.
constexpr size_t DecimalDigits(uint64_t v) {
  size_t n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

// p just past a string's opening quote. Returns the end of the string (past its closing quote)
// when it holds no escape and no control byte and is well-formed UTF-8; else nullptr.
inline const char* StringEnd(const char* p, const char* end) {
  while (true) {
    p = SkipPlainString(p, end);
    if (p == end) return nullptr;
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"') return p + 1;
    if (c < 0x80) return nullptr;  // a backslash or a control byte
    const size_t len =
        Utf8Length(reinterpret_cast<const unsigned char*>(p), static_cast<size_t>(end - p));
    if (len == 0) return nullptr;
    p += len;
  }
}

static_assert(ResourceName(Resource::kRegisters) == "registers" &&
                  ResourceName(Resource::kSharedMem) == "shared_mem" &&
                  ResourceName(Resource::kWarps) == "warps" &&
                  ResourceName(Resource::kBlocks) == "blocks" &&
                  ResourceName(Resource::kBarriers) == "barriers" &&
                  ResourceName(Resource::kCluster) == "cluster" &&
                  ResourceName(Resource::kOther) == "other",
              "ResourceAt below spells the resource names");

// The Resource named by the string at p (at its opening quote), or -1; sets *after past its
// closing quote. Reads nothing at or past end.
inline int ResourceAt(const char* p, const char* end, const char** after) {
  constexpr ptrdiff_t kLongest = 12;  // "shared_mem" with its quotes
  if (end - p < kLongest) return -1;
  const auto found = [p, after](int r, size_t n) {
    *after = p + n;
    return r;
  };
  switch (p[1]) {
    case 'r':
      if (Matches<R"("registers")">(p)) return found(0, 11);
      break;
    case 's':
      if (Matches<R"("shared_mem")">(p)) return found(1, 12);
      break;
    case 'w':
      if (Matches<R"("warps")">(p)) return found(2, 7);
      break;
    case 'b':
      if (Matches<R"("blocks")">(p)) return found(3, 8);
      if (Matches<R"("barriers")">(p)) return found(4, 10);
      break;
    case 'c':
      if (Matches<R"("cluster")">(p)) return found(5, 9);
      break;
    case 'o':
      if (Matches<R"("other")">(p)) return found(6, 7);
      break;
    default:
      break;
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// The walk over a line.

// Whether a decoding destination is a std::optional.
template <class O>
inline constexpr bool kIsOptionalOut = false;
template <class T>
inline constexpr bool kIsOptionalOut<std::optional<T>*> = true;

// Position in the line. Each Name<L>() moves past the member name L (`,"name":`); each ...Value()
// parses the value that follows and moves past it (Record). All return false, on any surprise,
// for the caller to give up.
class Cursor {
 public:
  // `info`: where the facts go.
  Cursor(const char* p, const char* end, LineInfo* info) : p_(p), end_(end), info_(info) {}

  uint32_t fact_present() const { return fact_present_; }
  // Whether member I of the table was read.
  bool present(int i) const { return (present_ >> i) & 1; }

  template <Lit L>
  [[gnu::always_inline]] bool Name() {
    static_assert(L.kSize >= 5 && LitHas<L>(0, ",\"") && LitHas<L>(L.kSize - 2, "\":"),
                  "a member name is written `,\"name\":`");
    if (!MatchesBefore<L>(p_, end_)) return false;
    p_ += L.kSize;
    return true;
  }

  // The line's opening: L is `{"type":"<name>","version":1,"ts_ns":`, then the values of ts_ns,
  // pid and seq, which go to *h.
  template <Lit L>
  bool Open(Header* h) {
    static constexpr std::string_view kHead = R"({"type":")";
    static constexpr std::string_view kTail = R"(","version":1,"ts_ns":)";
    static_assert(L.kSize > kHead.size() + kTail.size() && LitHas<L>(0, kHead) &&
                  LitHas<L>(L.kSize - kTail.size(), kTail));
    if (end_ - p_ < static_cast<ptrdiff_t>(L.kSize) || !Matches<L>(p_)) return false;
    p_ += L.kSize;
    return IntValue<kCount64>(&h->ts_ns) && Name<R"(,"pid":)">() && IntValue<kCount32>(&h->pid) &&
           Name<R"(,"seq":)">() && IntValue<kUint64>(&h->seq);
  }

  // The closing brace, then only whitespace to the end.
  bool Close() const {
    if (p_ == end_ || *p_ != '}') return false;
    const char* p = p_ + 1;
    while (p < end_ && IsSpace(*p)) ++p;
    return p == end_;
  }

  // kRoomy: p_[0, kRoom) is readable.
  template <Bounds B, bool kRoomy = false, class T = int64_t>
  [[gnu::always_inline]] bool IntValue(T* out = nullptr) {
    const char* p = p_;
    bool negative = false;
    if constexpr (B.negative_max != 0) {
      if ((kRoomy || p < end_) && *p == '-') {
        negative = true;
        ++p;
      }
    }
    const char* const digits_end = UintEnd<kRoomy>(p, end_);
    if (digits_end == nullptr) return false;
    const auto n = static_cast<size_t>(digits_end - p);
    // The value is needed for the output, for a sign, or for a range check when the number has
    // as many digits as the largest value (19 digits always fit).
    if (out != nullptr || negative || B.min > 0 || n >= DecimalDigits(B.max)) {
      const uint64_t v = UintValue(p, n, end_);
      if (negative ? (v == 0 || v > B.negative_max) : (v > B.max || v < B.min)) return false;
      if (out != nullptr) {
        *out = negative ? static_cast<T>(static_cast<int64_t>(0 - v)) : static_cast<T>(v);
      }
    }
    return Record(digits_end);
  }

  bool StringValue() {
    if (p_ == end_ || *p_ != '"') return false;
    const char* p = StringEnd(p_ + 1, end_);
    return p != nullptr && Record(p);
  }

  bool BoolValue() {
    if (end_ - p_ >= 4 && Matches<"true">(p_)) return Record(p_ + 4);
    if (end_ - p_ >= 5 && Matches<"false">(p_)) return Record(p_ + 5);
    return false;
  }

  // A number in [0, 1].
  bool FractionValue() {
    const char* p = p_;
    if (p == end_) return false;
    if (*p == '1') return Record(p + 1);
    if (*p != '0') return false;
    ++p;
    if (p < end_ && *p == '.') {
      const char* digits_end = SkipDigits(p + 1, end_);
      if (digits_end == p + 1) return false;
      p = digits_end;
    }
    return Record(p);
  }

  // A number >= 0.
  bool NonNegativeValue() {
    const char* p = UintEnd(p_, end_);
    if (p == nullptr) return false;
    if (p < end_ && *p == '.') {
      const char* digits_end = SkipDigits(p + 1, end_);
      if (digits_end == p + 1) return false;
      p = digits_end;
    }
    return Record(p);
  }

  // [x,y,z] of integers in [0, 2^32).
  bool DimValue() {
    if (kHaveRoomy && end_ - p_ >= kRoom) return DimValue<kHaveRoomy>();
    return DimValue<false>();
  }

  bool ResourceValue() {
    const char* p;
    return ResourceAt(p_, end_, &p) >= 0 && Record(p);
  }

  // An array of distinct resource names.
  bool ResourcesValue() {
    const char* p = p_;
    if (p == end_ || *p != '[') return false;
    ++p;
    if (p < end_ && *p == ']') return Record(p + 1);
    unsigned seen = 0;
    while (true) {
      const int r = ResourceAt(p, end_, &p);
      if (r < 0 || ((seen >> r) & 1) != 0) return false;
      seen |= 1u << r;
      if (p == end_) return false;
      if (*p == ']') return Record(p + 1);
      if (*p != ',') return false;
      ++p;
    }
  }

  bool OccupancySourceValue() {
    if (end_ - p_ >= 8 && Matches<R"("driver")">(p_)) return Record(p_ + 8);
    if (end_ - p_ >= 8 && Matches<R"("engine")">(p_)) return Record(p_ + 8);
    return false;
  }

  // A member name and its value in one call.
  template <Lit L, Bounds B, class T = int64_t>
  [[gnu::always_inline]] bool Int(T* out = nullptr) {
    // Far from the end (every member but the last few): no bounds check past this one.
    if constexpr (kHaveRoomy && L.kSize <= 32) {
      if (end_ - p_ >= static_cast<ptrdiff_t>(L.kSize) + kRoom) {
        if (!MatchesWide<L>(p_)) return false;
        p_ += L.kSize;
        return IntValue<B, kHaveRoomy>(out);
      }
    }
    return Name<L>() && IntValue<B>(out);
  }

  // The members of the tables (event_fields.h), one function per kind: Member<kind><L, I, args>
  // reads the member name L and its value, and notes that member I of the table was present
  // (for the R rules: Requires<I, J>). An Optional kind is also true when L is not at the cursor.
#define CUFLIGHT_FAST_KIND(kind, value)                         \
  template <Lit L, int I, auto... A, class O>                   \
  [[gnu::always_inline]] bool Member##kind(O out) {             \
    if (!Name<L>()) return kind##IsOptional;                    \
    return (value) && Seen(I) && NoteFact<L>() && Put(out);     \
  }
#define CUFLIGHT_FAST_KINDS(X)           \
  X(Number, NumberValue<A...>())         \
  X(OptionalNumber, NumberValue<A...>()) \
  X(OptionalBool, BoolValue())           \
  X(String, StringValue())               \
  X(Dim, DimValue())                     \
  X(OptionalDim, DimValue())             \
  X(OneResource, ResourceValue())        \
  X(ResourceSet, ResourcesValue())       \
  X(OptionalOccupancySource, OccupancySourceValue())
#define CUFLIGHT_FAST_OPTIONAL(kind, value) \
  static constexpr bool kind##IsOptional = std::string_view(#kind).starts_with("Optional");
  CUFLIGHT_FAST_KINDS(CUFLIGHT_FAST_OPTIONAL)
  CUFLIGHT_FAST_KINDS(CUFLIGHT_FAST_KIND)
#undef CUFLIGHT_FAST_OPTIONAL
#undef CUFLIGHT_FAST_KIND
#undef CUFLIGHT_FAST_KINDS

  // Integers: required ones in the roomy form of Int. The value goes to *out (when decoding)
  // and, for a fact, to LineInfo.
  template <Lit L, int I, IntRange R, class O>
  [[gnu::always_inline]] bool MemberInt(O out) {
    constexpr int f = FactOf<L>();
    if constexpr (!std::is_null_pointer_v<O>) {
      auto* const value = Target(out);
      return Int<L, R>(value) && Seen(I) && NoteFact<L>() && FactValue<L>(*value);
    } else if constexpr (f >= 0) {
      return Int<L, R>(&info_->fact_value[f]) && Seen(I) && NoteFact<L>();
    } else {
      return Int<L, R>() && Seen(I);
    }
  }
  template <Lit L, int I, IntRange R, class O>
  [[gnu::always_inline]] bool MemberOptionalInt(O out) {
    if (!Name<L>()) return true;
    constexpr int f = FactOf<L>();
    if constexpr (!std::is_null_pointer_v<O>) {
      auto* const value = Target(out);
      return IntValue<R>(value) && Seen(I) && NoteFact<L>() && FactValue<L>(*value);
    } else if constexpr (f >= 0) {
      return IntValue<R>(&info_->fact_value[f]) && Seen(I) && NoteFact<L>();
    } else {
      return IntValue<R>() && Seen(I);
    }
  }
  // An integer or null (read as -1, or nullopt).
  template <Lit L, int I, IntRange R, class O>
  [[gnu::always_inline]] bool MemberIntOrNull(O out) {
    if (!Name<L>()) return false;
    if (end_ - p_ >= 4 && Matches<"null">(p_)) {
      if constexpr (kIsOptionalOut<O>) {
        out->reset();
      } else if constexpr (!std::is_null_pointer_v<O>) {
        *out = -1;
      }
      return Record(p_ + 4) && Seen(I);
    }
    if constexpr (std::is_null_pointer_v<O>) {
      return IntValue<R>() && Seen(I);
    } else {
      return IntValue<R>(Target(out)) && Seen(I);
    }
  }

  // Where an integer goes: *out, or the value of the std::optional *out.
  template <class T>
  static T* Target(T* out) {
    return out;
  }
  template <class T>
  static T* Target(std::optional<T>* out) {
    return &out->emplace();
  }

  template <Lit L, class T>
  [[gnu::always_inline]] bool FactValue(T value) {
    constexpr int f = FactOf<L>();
    if constexpr (f >= 0) info_->fact_value[f] = static_cast<uint64_t>(value);
    return true;
  }

  // Converts the member just recorded into *out (when decoding; its text has the plain shape the
  // checks above accepted).
  template <class O>
  [[gnu::always_inline]] bool Put(O out) {
    if constexpr (!std::is_null_pointer_v<O>) Convert(last(), out);
    return true;
  }

  // The Fact a member name L (`,"name":`) is, or -1.
  template <Lit L>
  static constexpr int FactOf() {
    return FactIndex(std::string_view(L.text + 2, L.kSize - 4));
  }

  // Notes the member just recorded when it is a fact.
  template <Lit L>
  [[gnu::always_inline]] bool NoteFact() {
    constexpr int f = FactOf<L>();
    if constexpr (f >= 0) {
      fact_present_ |= 1u << f;
      info_->fact_raw[f] = last();
    }
    return true;
  }

  // dependentRequired: member I present when member J is.
  template <int I, int J>
  [[gnu::always_inline]] bool Requires() const {
    return ((present_ >> J) & 1) == 0 || ((present_ >> I) & 1) != 0;
  }

  template <auto kLo, auto kHi>
  [[gnu::always_inline]] bool NumberValue() {
    static_assert(kLo == 0 && (kHi == 1 || kHi == kNoMaximum), "the schema's numbers");
    if constexpr (kHi == 1) {
      return FractionValue();
    } else {
      return NonNegativeValue();
    }
  }

  static void Convert(std::string_view raw, std::string* out) {
    out->assign(raw.data() + 1, raw.size() - 2);
  }
  static void Convert(std::string_view raw, double* out) {
    std::from_chars(raw.data(), raw.data() + raw.size(), *out);
  }
  static void Convert(std::string_view raw, std::optional<double>* out) {
    Convert(raw, &out->emplace());
  }
  static void Convert(std::string_view raw, bool* out) { *out = raw[0] == 't'; }
  static void Convert(std::string_view raw, std::optional<bool>* out) {
    Convert(raw, &out->emplace());
  }
  static void Convert(std::string_view raw, Dim3* out) {
    uint32_t xyz[3] = {0, 0, 0};
    int i = 0;
    for (const char c : raw.substr(1)) {
      if (IsDigit(c)) {
        xyz[i] = xyz[i] * 10 + static_cast<uint32_t>(c - '0');
      } else {
        ++i;
      }
    }
    *out = {xyz[0], xyz[1], xyz[2]};
  }
  static void Convert(std::string_view raw, std::optional<Dim3>* out) {
    Convert(raw, &out->emplace());
  }
  static void Convert(std::string_view raw, Resource* out) {
    *out = ResourceFromName(raw.substr(1, raw.size() - 2)).value_or(Resource{});
  }
  static void Convert(std::string_view raw, ResourceMask* out) {
    ResourceMask mask = 0;
    size_t open = raw.find('"');
    while (open != std::string_view::npos) {
      const size_t close = raw.find('"', open + 1);
      if (const std::optional<Resource> r = ResourceFromName(raw.substr(open + 1, close - open - 1))) {
        mask = static_cast<ResourceMask>(mask | MaskOf(*r));
      }
      open = raw.find('"', close + 1);
    }
    *out = mask;
  }
  static void Convert(std::string_view raw, OccupancySource* out) {
    *out = raw[1] == 'd' ? OccupancySource::kDriver : OccupancySource::kEngine;
  }

 private:
  [[gnu::always_inline]] bool Seen(int i) {
    present_ |= uint64_t{1} << i;
    return true;
  }

  // kRoomy: p_[0, kRoom) is readable (the longest dim, `[` and 3 times 10 digits and a
  // separator, is 34 bytes).
  template <bool kRoomy>
  [[gnu::always_inline]] bool DimValue() {
    const char* p = p_;
    if (!kRoomy && p == end_) return false;
    if (*p != '[') return false;
    ++p;
    for (int i = 0; i < 3; ++i) {
      const char* const digits_end = UintEnd<kRoomy>(p, end_);
      if (digits_end == nullptr) return false;
      const auto n = static_cast<size_t>(digits_end - p);
      if (n >= DecimalDigits(kUint32.hi) &&
          (n > DecimalDigits(kUint32.hi) || UintValue(p, n, end_) > kUint32.hi)) {
        return false;
      }
      p = digits_end;
      if ((!kRoomy && p == end_) || *p != (i < 2 ? ',' : ']')) return false;
      ++p;
    }
    return Record(p);
  }

  // The value just read, [value_, end), ends at end; moves to end.
  [[gnu::always_inline]] bool Record(const char* end) {
    value_ = p_;
    p_ = end;
    return true;
  }

  // The text of the value Record() took last.
  std::string_view last() const { return {value_, static_cast<size_t>(p_ - value_)}; }

  const char* p_;
  const char* const end_;
  const char* value_ = nullptr;  // where the value Record() took last starts
  LineInfo* const info_;
  uint64_t present_ = 0;       // bit I: member I of the table was read
  uint32_t fact_present_ = 0;  // LineInfo::fact_present, stored by Walk
};

// ---------------------------------------------------------------------------------------------
// The event types, in the encoder's order (encoder.cc).

// Where a walk puts member values: nowhere when validating (E void), else the member of *e.
template <class E, class F>
[[gnu::always_inline]] inline auto Out(E* e, F member) {
  if constexpr (std::is_void_v<E>) {
    return nullptr;
  } else {
    return member(e);
  }
}

// The index of `name` in a table's names (every table has at most 64 members).
template <size_t N>
consteval int IndexIn(const std::string_view (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  throw "not a member of the table";
}

#define CUFLIGHT_FAST_NAME(kind, name, member, ...) #name,
#define CUFLIGHT_FAST_NO_RULE(name, trigger)
#define CUFLIGHT_FAST_FIELD(kind, name, member, ...)                                              \
  &&c.template Member##kind<",\"" #name "\":", IndexIn(kNames, #name) __VA_OPT__(, ) __VA_ARGS__>( \
      Out(e, [](auto* x) { return &x->member; }))
#define CUFLIGHT_FAST_RULE(name, trigger) \
  &&c.template Requires<IndexIn(kNames, #name), IndexIn(kNames, #trigger)>()
#define CUFLIGHT_FAST_WALK(Function, type_name, TABLE)                                  \
  template <class E>                                                                    \
  inline bool Function(Cursor& c, Header* h, E* e) {                                    \
    static constexpr std::string_view kNames[] = {TABLE(CUFLIGHT_FAST_NAME, CUFLIGHT_FAST_NO_RULE)}; \
    static_assert(std::size(kNames) <= 64);                                             \
    return c.Open<"{\"type\":\"" type_name "\",\"version\":1,\"ts_ns\":">(h)        \
        TABLE(CUFLIGHT_FAST_FIELD, CUFLIGHT_FAST_RULE) && c.Close();                    \
  }

CUFLIGHT_FAST_WALK(Kernel, "kernel", CUFLIGHT_SCHEMA_KERNEL)
CUFLIGHT_FAST_WALK(KernelTime, "kernel_time", CUFLIGHT_SCHEMA_KERNEL_TIME)
CUFLIGHT_FAST_WALK(Launch, "launch", CUFLIGHT_SCHEMA_LAUNCH)

// Walks a kernel (E: OwnedKernelEvent) or kernel_time line, writing its members into *e unless
// e is null (whose header, strings' buffers aside, the caller has reset). Everything is inlined
// into one function per event type and destination, so that the cursor lives in registers: the
// walk is a chain of dependent loads, and a cursor in memory would add a store-to-load round trip
// to every member. True: *info is filled as the general path fills it for an accepted line. False
// decides nothing; *info and *e are then unspecified.
template <class E, bool kFill>
[[gnu::flatten]] bool Walk(std::string_view line, LineInfo* info, E* e) {
  constexpr bool kKernel = std::is_same_v<E, OwnedKernelEvent>;
  using Out = std::conditional_t<kFill, E, void>;
  Out* const out = static_cast<Out*>(kFill ? e : nullptr);
  Header header;
  Cursor c(line.data(), line.data() + line.size(), info);
  if constexpr (kKernel) {
    if (!Kernel(c, &header, out)) return false;
  } else if constexpr (std::is_same_v<E, OwnedLaunchEvent>) {
    if (!Launch(c, &header, out)) return false;
  } else {
    if (!KernelTime(c, &header, out)) return false;
  }
  if constexpr (kFill) {
    e->header = header;
    if constexpr (kKernel) {
      static constexpr std::string_view kNames[] = {
          CUFLIGHT_SCHEMA_KERNEL(CUFLIGHT_FAST_NAME, CUFLIGHT_FAST_NO_RULE)};
      e->occupancy.has_cluster = c.present(IndexIn(kNames, "cluster_occupancy"));
    }
  }
  info->fact_present = c.fact_present();
  info->fact_escaped = 0;  // strings with an escape are the general path's
  info->line = line;
  info->type = E::kType;
  info->type_known = true;
  info->type_text = EventTypeName(E::kType);
  info->header = header;
  info->header_valid = true;
  return true;
}

// True when `line` is a kernel or kernel_time line in the encoder's layout and valid: *info is
// then filled as the general path fills it. False decides nothing (every other type goes to the
// general path: at most a few lines a second per process).
inline bool AcceptEncoderLayout(std::string_view line, LineInfo* info) {
  // `{"type":"kernel"`, `{"type":"kernel_time"` or `{"type":"launch"`: the walk checks the
  // whole prefix.
  if (line.size() < 40) return false;
  if (line[9] == 'l') return Walk<OwnedLaunchEvent, false>(line, info, nullptr);
  if (line[9] != 'k') return false;
  if (line[15] == '"') return Walk<OwnedKernelEvent, false>(line, info, nullptr);
  return Walk<OwnedKernelTimeEvent, false>(line, info, nullptr);
}

// AcceptEncoderLayout for a kernel (or kernel_time) line, also writing its members into *e.
template <class E>
bool DecodeEncoderLayout(std::string_view line, LineInfo* info, E* e) {
  return Walk<E, true>(line, info, e);
}

}  // namespace cuflight::schema::internal::fast_path

#endif  // CUFLIGHT_SCHEMA_SRC_VALIDATOR_FAST_PATH_H_
