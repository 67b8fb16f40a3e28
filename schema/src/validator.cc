#include "cuflight/schema/validator.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "cuflight/schema/event_fields.h"
#include "validator_bytes.h"
#include "validator_fast_path.h"
#include "validator_internal.h"

namespace cuflight::schema {
namespace {

using internal::IsDigit;
using internal::IsSpace;
using internal::SkipDigits;
using internal::SkipPlainString;
using internal::UintValue;
using internal::Utf8Length;

// ---------------------------------------------------------------------------------------------
// Known member names: the union over every event type. One slot per name.

// The union of the member names of every table (event_fields.h), each once, in first-seen order.
#define CUFLIGHT_KEY_NAME(kind, name, member, ...) #name,
#define CUFLIGHT_KEY_RULE(name, trigger)
#define CUFLIGHT_KEY_TABLE(type, TABLE) TABLE(CUFLIGHT_KEY_NAME, CUFLIGHT_KEY_RULE)
constexpr std::string_view kAllNames[] = {
    "type", "version", CUFLIGHT_SCHEMA_HEADER(CUFLIGHT_KEY_NAME, CUFLIGHT_KEY_RULE)
        CUFLIGHT_SCHEMA_EVENT_TABLES(CUFLIGHT_KEY_TABLE)
            CUFLIGHT_SCHEMA_STALL_STREAM(CUFLIGHT_KEY_NAME, CUFLIGHT_KEY_RULE)
                CUFLIGHT_SCHEMA_STALL_LAUNCH(CUFLIGHT_KEY_NAME, CUFLIGHT_KEY_RULE)};

constexpr bool SeenBefore(size_t i) {
  for (size_t j = 0; j < i; ++j) {
    if (kAllNames[j] == kAllNames[i]) return true;
  }
  return false;
}

constexpr size_t kKeyCount = [] {
  size_t n = 0;
  for (size_t i = 0; i < std::size(kAllNames); ++i) n += !SeenBefore(i);
  return n;
}();

constexpr std::array<std::string_view, kKeyCount> kKeyNames = [] {
  std::array<std::string_view, kKeyCount> names{};
  size_t n = 0;
  for (size_t i = 0; i < std::size(kAllNames); ++i) {
    if (!SeenBefore(i)) names[n++] = kAllNames[i];
  }
  return names;
}();

// A known member name's slot.
using Key = uint8_t;

constexpr int FindKey(std::string_view name) {
  for (size_t k = 0; k < kKeyCount; ++k) {
    if (kKeyNames[k] == name) return static_cast<int>(k);
  }
  return -1;
}

consteval Key KeyOf(std::string_view name) {
  const int k = FindKey(name);
  if (k < 0) throw "not a known member name";  // not a constant expression: a compile error
  return static_cast<Key>(k);
}

// Each Fact's Key.
constexpr std::array<Key, kFactCount> kFactKeys = [] {
  std::array<Key, kFactCount> keys{};
  for (int f = 0; f < kFactCount; ++f) keys[static_cast<size_t>(f)] = static_cast<Key>(FindKey(kFactNames[f]));
  return keys;
}();
static_assert([] {
  for (const std::string_view name : kFactNames) {
    if (FindKey(name) < 0) return false;
  }
  return true;
}(), "every fact is a member of some table");

constexpr Key k_type = KeyOf("type");
constexpr Key k_version = KeyOf("version");

static_assert(kKeyCount <= 192, "the seen-set below has 192 bits");
static_assert(std::size(kKeyNames) == kKeyCount);

constexpr size_t kMaxKeyLength = std::ranges::max(kKeyNames, {}, &std::string_view::size).size();
static_assert(std::ranges::min(kKeyNames, {}, &std::string_view::size).size() >= 2,
              "NameHash below reads two bytes at each end of a name");

// Open addressing with linear probing, at least 16 entries per name: a lookup is almost always
// one probe and one comparison.
constexpr size_t kKeyTableBits = 12;
constexpr size_t kKeyTableMask = (size_t{1} << kKeyTableBits) - 1;
static_assert(kKeyCount * 16 <= kKeyTableMask + 1);
constexpr uint8_t kNoKey = 0xFF;

// The hash of a name of n >= 2 bytes: its length, its first two and its last two bytes.
constexpr size_t NameHash(const char* s, size_t n) {
  const auto byte = [s](size_t i) { return uint64_t{static_cast<unsigned char>(s[i])}; };
  const uint64_t x = n | byte(0) << 8 | byte(1) << 16 | byte(n - 2) << 24 | byte(n - 1) << 32;
  return static_cast<size_t>((x * 0x9E3779B97F4A7C15u) >> (64 - kKeyTableBits));
}

// Hash -> Key, or kNoKey.
constexpr std::array<uint8_t, kKeyTableMask + 1> kKeyTable = [] {
  std::array<uint8_t, kKeyTableMask + 1> table{};
  for (uint8_t& entry : table) entry = kNoKey;
  for (size_t k = 0; k < kKeyCount; ++k) {
    size_t h = NameHash(kKeyNames[k].data(), kKeyNames[k].size());
    while (table[h] != kNoKey) h = (h + 1) & kKeyTableMask;
    table[h] = static_cast<uint8_t>(k);
  }
  return table;
}();

// The Key named s[0, n), or kNoKey. s[0, n) must be readable; nothing past it is read.
inline uint8_t LookupKey(const char* s, size_t n) {
  if (n < 2 || n > kMaxKeyLength) return kNoKey;
  for (size_t h = NameHash(s, n);; h = (h + 1) & kKeyTableMask) {
    const uint8_t k = kKeyTable[h];
    if (k == kNoKey || kKeyNames[k] == std::string_view(s, n)) return k;
  }
}

// ---------------------------------------------------------------------------------------------
// String escapes (on text already checked by the lexer).

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The 4 hex digits at s[0, 4) as a number, or -1.
int Hex4(const char* s) {
  int value = 0;
  for (int i = 0; i < 4; ++i) {
    const int h = HexValue(s[i]);
    if (h < 0) return -1;
    value = value * 16 + h;
  }
  return value;
}

// Decodes the escape at raw[*i] == '\\' of checked string text into out[0, 4); returns the number
// of bytes and moves *i past the escape.
size_t DecodeEscape(std::string_view raw, size_t* i, char out[4]) {
  const char c = raw[*i + 1];
  *i += 2;
  switch (c) {
    case 'b':
      out[0] = '\b';
      return 1;
    case 'f':
      out[0] = '\f';
      return 1;
    case 'n':
      out[0] = '\n';
      return 1;
    case 'r':
      out[0] = '\r';
      return 1;
    case 't':
      out[0] = '\t';
      return 1;
    case 'u':
      break;
    default:  // '"', '\\', '/'
      out[0] = c;
      return 1;
  }
  auto code = static_cast<uint32_t>(Hex4(raw.data() + *i));
  *i += 4;
  if (code >= 0xD800 && code <= 0xDBFF) {  // a high surrogate; the lexer checked its low half
    const auto low = static_cast<uint32_t>(Hex4(raw.data() + *i + 2));
    *i += 6;
    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
  }
  if (code < 0x80) {
    out[0] = static_cast<char>(code);
    return 1;
  }
  if (code < 0x800) {
    out[0] = static_cast<char>(0xC0 | (code >> 6));
    out[1] = static_cast<char>(0x80 | (code & 0x3F));
    return 2;
  }
  if (code < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (code >> 12));
    out[1] = static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (code & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (code >> 18));
  out[1] = static_cast<char>(0x80 | ((code >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((code >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (code & 0x3F));
  return 4;
}

// Checked string text (between its quotes), one unescaped byte at a time.
class Unescaper {
 public:
  explicit Unescaper(std::string_view raw) : raw_(raw) {}

  // The next byte, or -1 after the last.
  int Next() {
    if (at_ < size_) return static_cast<unsigned char>(unit_[at_++]);
    if (i_ == raw_.size()) return -1;
    if (raw_[i_] != '\\') return static_cast<unsigned char>(raw_[i_++]);
    size_ = DecodeEscape(raw_, &i_, unit_);
    at_ = 1;
    return static_cast<unsigned char>(unit_[0]);
  }

 private:
  std::string_view raw_;
  size_t i_ = 0;     // the next byte of raw_
  char unit_[4]{};   // the bytes of the last escape...
  size_t size_ = 0;  // ... of which there are size_
  size_t at_ = 0;    // ... and the next is at_
};

// True when the checked string text `raw` (between its quotes) unescapes to `want`.
bool UnescapedEquals(std::string_view raw, std::string_view want) {
  Unescaper u(raw);
  for (const char c : want) {
    if (u.Next() != static_cast<unsigned char>(c)) return false;
  }
  return u.Next() < 0;
}

// Unescapes checked string text into out[0, cap); returns the length, or nullopt if it does not
// fit.
std::optional<size_t> Unescape(std::string_view raw, char* out, size_t cap) {
  Unescaper u(raw);
  size_t n = 0;
  for (int c = u.Next(); c >= 0; c = u.Next()) {
    if (n == cap) return std::nullopt;
    out[n++] = static_cast<char>(c);
  }
  return n;
}

// The Key of a checked member name (its raw text, and whether it has an escape), or kNoKey.
uint8_t KeyOfName(std::string_view raw, bool escaped) {
  if (!escaped) return LookupKey(raw.data(), raw.size());
  char name[kMaxKeyLength];
  const std::optional<size_t> n = Unescape(raw, name, sizeof(name));
  return n ? LookupKey(name, *n) : kNoKey;
}

// Two checked member names (raw text, each with its escaped flag) that unescape to the same bytes.
bool SameName(std::string_view a, bool a_escaped, std::string_view b, bool b_escaped) {
  if (!a_escaped && !b_escaped) return a == b;
  Unescaper x(a);
  Unescaper y(b);
  for (int c = x.Next();; c = x.Next()) {
    if (c != y.Next()) return false;
    if (c < 0) return true;
  }
}

// ---------------------------------------------------------------------------------------------
// Lexer: checks JSON syntax the way nlohmann/json reads it.

enum class Kind : uint8_t { kString, kNumber, kObject, kArray, kTrue, kFalse, kNull };

// A value in the line. No default member initializers: arrays of them stay uninitialized.
struct Value {
  const char* begin;  // the JSON text [begin, end); a string's quotes included
  const char* end;
  Kind kind;
  bool escaped;   // string: has a backslash escape
  bool integral;  // number: no fraction or exponent, and within int64 (negative) or uint64
  bool negative;  // number: written with '-' (and, when integral, nonzero)
  bool unit_fraction;  // number: written "0.ddd" (no sign, no exponent), so in [0, 1)
  uint64_t magnitude;  // number, when integral

  std::string_view text() const { return {begin, static_cast<size_t>(end - begin)}; }
  // A string's text between its quotes.
  std::string_view inner() const { return {begin + 1, static_cast<size_t>(end - begin - 2)}; }
};

class Lexer {
 public:
  explicit Lexer(const char* end) : end_(end) {}

  const char* fail_at() const { return fail_at_; }
  const char* fail_what() const { return fail_what_; }

  // The encoder writes no whitespace, so the first test usually ends it.
  const char* SkipSpace(const char* p) const {
    while (p < end_ && static_cast<unsigned char>(*p) <= ' ' && IsSpace(*p)) ++p;
    return p;
  }

  // p is just past an opening quote. Returns the end of the string (past its closing quote), or
  // nullptr. Sets *escaped when the string holds a backslash escape.
  [[gnu::always_inline]] const char* ScanString(const char* p, bool* escaped) {
    while (true) {
      p = SkipPlainString(p, end_);
      if (p == end_) return Fail(p, "string without its closing quote");
      const auto c = static_cast<unsigned char>(*p);
      if (c == '"') return p + 1;
      if (c == '\\') {
        p = ScanEscape(p);
        if (p == nullptr) return nullptr;
        *escaped = true;
      } else if (c < 0x20) {
        return Fail(p, "control character in a string");
      } else {
        const size_t len =
            Utf8Length(reinterpret_cast<const unsigned char*>(p), static_cast<size_t>(end_ - p));
        if (len == 0) return Fail(p, "invalid UTF-8 in a string");
        p += len;
      }
    }
  }

  // p at '-' or a digit. Returns the end of the number, or nullptr. Fills v's number fields.
  [[gnu::always_inline]] const char* ScanNumber(const char* p, Value* v) {
    const char* const start = p;
    const bool negative = *p == '-';
    if (negative && ++p == end_) return Fail(p, "invalid number");
    uint64_t magnitude = 0;
    bool overflow = false;
    int64_t int_digits = 0;  // significant digits before the point
    if (*p == '0') {
      ++p;
    } else if (IsDigit(*p)) {
      const char* digits = p;
      p = SkipDigits(p, end_);
      int_digits = p - digits;
      if (int_digits <= 19) {
        magnitude = UintValue(digits, static_cast<size_t>(int_digits), end_);
      } else if (int_digits == 20) {
        magnitude = UintValue(digits, 19, end_);
        overflow = __builtin_mul_overflow(magnitude, uint64_t{10}, &magnitude) ||
                   __builtin_add_overflow(magnitude, static_cast<uint64_t>(p[-1] - '0'), &magnitude);
      } else {
        overflow = true;
      }
    } else {
      return Fail(p, "invalid number");
    }
    bool fraction = false;
    int64_t fraction_zeros = 0;  // leading zeros after the point, when the integer part is 0
    bool fraction_nonzero = false;
    if (p < end_ && *p == '.') {
      ++p;
      if (p == end_ || !IsDigit(*p)) return Fail(p, "invalid number");
      fraction = true;
      const char* digits = p;
      p = SkipDigits(p, end_);
      if (int_digits == 0) {
        const char* q = digits;
        while (q < p && *q == '0') ++q;
        fraction_zeros = q - digits;
        fraction_nonzero = q < p;
      }
    }
    bool exponent_part = false;
    int64_t exponent = 0;
    if (p < end_ && (*p == 'e' || *p == 'E')) {
      exponent_part = true;
      ++p;
      bool exponent_negative = false;
      if (p < end_ && (*p == '+' || *p == '-')) {
        exponent_negative = *p == '-';
        ++p;
      }
      if (p == end_ || !IsDigit(*p)) return Fail(p, "invalid number");
      constexpr int64_t kSaturated = 1'000'000'000;  // far beyond any double's exponent
      while (p < end_ && IsDigit(*p)) {
        if (exponent < kSaturated) exponent = exponent * 10 + (*p - '0');
        ++p;
      }
      if (exponent_negative) exponent = -exponent;
    }
    v->kind = Kind::kNumber;
    v->end = p;
    if (!fraction && !exponent_part && !overflow &&
        (!negative || magnitude <= (uint64_t{1} << 63))) {
      v->integral = true;
      v->negative = negative && magnitude != 0;
      v->unit_fraction = false;
      v->magnitude = magnitude;
      return p;
    }
    // A double (what nlohmann makes of it with strtod): it must be finite. The decimal exponent of
    // the leading digit decides, except within [1e308, 1e309), where rounding does.
    v->integral = false;
    v->negative = negative;
    v->unit_fraction = !negative && int_digits == 0 && !exponent_part;
    v->magnitude = 0;
    int64_t decimal_exponent;
    if (int_digits > 0) {
      decimal_exponent = int_digits - 1 + exponent;
    } else if (fraction_nonzero) {
      decimal_exponent = exponent - fraction_zeros - 1;
    } else {
      return p;  // zero
    }
    if (decimal_exponent < 308) return p;
    if (decimal_exponent == 308) {
      double d = 0;
      if (std::from_chars(start, p, d).ec != std::errc::result_out_of_range) return p;
    }
    return Fail(start, "number beyond the range of a double");
  }

  // p at '{' or '[' at nesting depth `depth` (the event object is at 1). Returns the end of the
  // container, or nullptr. Iterative: bit i of `objects` tells whether the container open at
  // level i is an object.
  const char* ScanContainer(const char* p, int depth) {
    uint64_t objects = 0;
    int level = 0;
    bool in_object = false;
    while (true) {
      // p at an opening bracket.
      if (depth + level > kMaxNestingDepth) return Fail(p, "nested too deep");
      in_object = *p == '{';
      if (in_object) objects |= uint64_t{1} << level;
      ++level;
      p = SkipSpace(p + 1);
      if (p == end_) return Fail(p, "unexpected end");
      bool closed = *p == (in_object ? '}' : ']');
      if (closed) ++p;
      while (true) {
        if (closed) {
          --level;
          if (level == 0) return p;
          objects &= ~(uint64_t{1} << level);
          in_object = (objects >> (level - 1)) & 1;
        } else {
          // p at an element (in an object: its name).
          if (in_object) {
            if (*p != '"') return Fail(p, "expected a member name");
            bool escaped = false;
            p = ScanString(p + 1, &escaped);
            if (p == nullptr) return nullptr;
            p = SkipSpace(p);
            if (p == end_ || *p != ':') return Fail(p, "expected ':'");
            p = SkipSpace(p + 1);
            if (p == end_) return Fail(p, "unexpected end");
          }
          if (*p == '{' || *p == '[') break;  // open it
          Value scalar;
          p = ScanScalar(p, &scalar);
          if (p == nullptr) return nullptr;
        }
        // After an element or a closed container.
        p = SkipSpace(p);
        if (p == end_) return Fail(p, "unexpected end");
        if (*p == ',') {
          p = SkipSpace(p + 1);
          if (p == end_) return Fail(p, "unexpected end");
          closed = false;
          if (in_object && *p != '"') return Fail(p, "expected a member name");
          continue;
        }
        if (*p != (in_object ? '}' : ']')) return Fail(p, "expected ',' or a closing bracket");
        ++p;
        closed = true;
      }
    }
  }

  // A string, number or literal at p (p < end). Returns its end, or nullptr.
  [[gnu::always_inline]] const char* ScanScalar(const char* p, Value* v) {
    v->begin = p;
    switch (*p) {
      case '"':
        v->kind = Kind::kString;
        v->escaped = false;
        p = ScanString(p + 1, &v->escaped);
        break;
      case 't':
        v->kind = Kind::kTrue;
        p = Literal(p, "true", 4);
        break;
      case 'f':
        v->kind = Kind::kFalse;
        p = Literal(p, "false", 5);
        break;
      case 'n':
        v->kind = Kind::kNull;
        p = Literal(p, "null", 4);
        break;
      case '-':
      case '0':
      case '1':
      case '2':
      case '3':
      case '4':
      case '5':
      case '6':
      case '7':
      case '8':
      case '9':
        return ScanNumber(p, v);
      default:
        return Fail(p, "expected a value");
    }
    v->end = p;
    return p;
  }

  // Any value at p (p < end) at nesting depth `depth`.
  [[gnu::always_inline]] const char* ScanValue(const char* p, int depth, Value* v) {
    if (*p == '{' || *p == '[') {
      v->begin = p;
      v->kind = *p == '{' ? Kind::kObject : Kind::kArray;
      p = ScanContainer(p, depth);
      v->end = p;
      return p;
    }
    return ScanScalar(p, v);
  }

 private:
  const char* Literal(const char* p, const char* text, size_t n) {
    if (static_cast<size_t>(end_ - p) < n || std::memcmp(p, text, n) != 0) {
      return Fail(p, "invalid literal");
    }
    return p + n;
  }

  // p at a backslash.
  const char* ScanEscape(const char* p) {
    if (end_ - p < 2) return Fail(p, "string without its closing quote");
    switch (p[1]) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        return p + 2;
      case 'u':
        break;
      default:
        return Fail(p, "invalid escape");
    }
    if (end_ - p < 6) return Fail(p, "\\u without 4 hex digits");
    const int code = Hex4(p + 2);
    if (code < 0) return Fail(p, "\\u without 4 hex digits");
    if (code >= 0xDC00 && code <= 0xDFFF) return Fail(p, "lone low surrogate");
    if (code < 0xD800 || code > 0xDBFF) return p + 6;
    if (end_ - p < 12 || p[6] != '\\' || p[7] != 'u') return Fail(p, "lone high surrogate");
    const int low = Hex4(p + 8);
    if (low < 0) return Fail(p + 6, "\\u without 4 hex digits");
    if (low < 0xDC00 || low > 0xDFFF) return Fail(p, "lone high surrogate");
    return p + 12;
  }

  std::nullptr_t Fail(const char* at, const char* what) {
    fail_at_ = at;
    fail_what_ = what;
    return nullptr;
  }

  const char* end_;
  const char* fail_at_ = nullptr;
  const char* fail_what_ = "";
};

// Iterates the elements of a checked array, or the members of a checked object.
class ElementReader {
 public:
  explicit ElementReader(const Value& container)
      : lexer_(container.end), p_(container.begin + 1) {}

  // The next element (and, in an object, its name); false after the last.
  bool Next(Value* v, std::string_view* name = nullptr, bool* name_escaped = nullptr) {
    p_ = lexer_.SkipSpace(p_);
    if (*p_ == ',') p_ = lexer_.SkipSpace(p_ + 1);
    if (*p_ == ']' || *p_ == '}') return false;
    if (*p_ == '"' && name != nullptr) {
      bool escaped = false;
      const char* end = lexer_.ScanString(p_ + 1, &escaped);
      *name = std::string_view(p_ + 1, static_cast<size_t>(end - p_ - 2));
      *name_escaped = escaped;
      p_ = lexer_.SkipSpace(lexer_.SkipSpace(end) + 1);  // past ':'
    }
    p_ = lexer_.ScanValue(p_, 2, v);
    return true;
  }

 private:
  Lexer lexer_;
  const char* p_;
};

// ---------------------------------------------------------------------------------------------
// Numbers as Decode sees them.

double DoubleOf(const Value& v) {
  if (v.integral) {
    if (v.negative) return static_cast<double>(static_cast<int64_t>(0 - v.magnitude));
    return static_cast<double>(v.magnitude);
  }
  double d = 0;
  // The lexer rejected overflow, so out_of_range means underflow, which strtod rounds to zero.
  if (std::from_chars(v.begin, v.end, d).ec != std::errc()) d = v.negative ? -0.0 : 0.0;
  return d;
}

struct Integral {
  bool negative = false;
  uint64_t magnitude = 0;
};

enum class IntegralKind { kOk, kNotInteger, kTooLarge };

IntegralKind ToIntegral(const Value& v, Integral* out) {
  if (v.kind != Kind::kNumber) return IntegralKind::kNotInteger;
  if (v.integral) {
    *out = {v.negative, v.magnitude};
    return IntegralKind::kOk;
  }
  const double d = DoubleOf(v);
  if (!std::isfinite(d) || std::trunc(d) != d) return IntegralKind::kNotInteger;
  if (std::fabs(d) >= 18446744073709551616.0) return IntegralKind::kTooLarge;  // 2^64
  *out = {d < 0, static_cast<uint64_t>(std::fabs(d))};
  return IntegralKind::kOk;
}

bool InRange(const Integral& x, const IntRange& r) {
  if (x.negative) return r.lo < 0 && x.magnitude <= 0 - static_cast<uint64_t>(r.lo);
  return x.magnitude <= r.hi && (r.lo <= 0 || x.magnitude >= static_cast<uint64_t>(r.lo));
}

template <class T>
T ValueOf(const Integral& x) {
  if (x.negative) return static_cast<T>(static_cast<int64_t>(0 - x.magnitude));
  return static_cast<T>(x.magnitude);
}

// A number in [lo, hi] for lo == 0 and hi in {1, infinity}, as Decode compares doubles.
bool NumberInRange(const Value& v, double lo, double hi) {
  if (lo == 0 && !v.negative) {
    if (hi == kInfinity) return true;  // finite (the lexer checked) and not negative
    if (v.unit_fraction) return hi >= 1;
    if (v.integral) return static_cast<double>(v.magnitude) <= hi;
  }
  const double d = DoubleOf(v);
  return d >= lo && d <= hi;
}

// ---------------------------------------------------------------------------------------------
// Messages, in fixed storage.

class MessageBuilder {
 public:
  explicit MessageBuilder(ValidateError* error) : error_(error) {
    if (error_ != nullptr) error_->size = 0;
  }

  MessageBuilder& Add(std::string_view s) {
    if (error_ == nullptr) return *this;
    for (const char c : s) {
      if (error_->size + 1 >= ValidateError::kCapacity) break;
      const auto u = static_cast<unsigned char>(c);
      error_->text[error_->size++] = (u < 0x20 || u >= 0x7F) ? '?' : c;
    }
    error_->text[error_->size] = '\0';
    return *this;
  }

  template <class T>
  MessageBuilder& Number(T v) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof(digits), v);
    return Add(std::string_view(digits, static_cast<size_t>(r.ptr - digits)));
  }

  // At most 40 bytes of a value's JSON text.
  MessageBuilder& Excerpt(std::string_view text) {
    constexpr size_t kMaxExcerpt = 40;
    if (text.size() <= kMaxExcerpt) return Add(text);
    return Add(text.substr(0, kMaxExcerpt - 3)).Add("...");
  }

 private:
  ValidateError* error_;
};

// ---------------------------------------------------------------------------------------------
// The parsed line: one slot per known name (the last occurrence), and the set of names seen.

struct Slots {
  std::array<Value, kKeyCount> value;  // uninitialized; meaningful where `seen` says
  uint64_t seen[3] = {0, 0, 0};

  bool Has(Key k) const { return (seen[k >> 6] >> (k & 63)) & 1; }
  void Set(Key k, const Value& v) {
    value[k] = v;
    seen[k >> 6] |= uint64_t{1} << (k & 63);
  }
};

class Checker;
template <bool kFill>
void CheckFields(Checker& c, OwnedStallLaunch* e);
template <bool kFill>
void CheckFields(Checker& c, OwnedStallStream* e);

// Where a check writes what it read: nowhere (a null `out`, when only validating), or the member
// of the event Decode returns. The stores only run once the value is known to be valid.
template <class T>
void SetNull(T* out) {
  if constexpr (requires { out->reset(); }) {
    out->reset();
  } else {
    *out = T{-1};
  }
}

template <class T>
void SetInt(T* out, const Integral& x) {
  if constexpr (requires { out->emplace(); }) {
    *out = ValueOf<typename T::value_type>(x);
  } else {
    *out = ValueOf<T>(x);
  }
}

// A checked string value, unescaped.
void SetString(const Value& v, std::string* out) {
  const std::string_view raw = v.inner();
  if (!v.escaped) {
    out->assign(raw);
    return;
  }
  out->resize(raw.size());  // never longer unescaped
  out->resize(Unescape(raw, out->data(), out->size()).value_or(0));
}

// The type-specific rules over the slots, in Decode's order (the order of the tables); the first
// failure is kept and every later check is a no-op. Each check takes where its value goes: a null
// pointer to validate only, else the event's member (Decode, ValidateInto with an event).
class Checker {
 public:
  Checker(const Slots& slots, std::string_view prefix, ValidateError* error)
      : slots_(slots), prefix_(prefix), error_(error) {}

  bool ok() const { return reason_ == Reason::kOk; }
  Reason reason() const { return reason_; }
  bool Has(Key k) const { return slots_.Has(k); }

  template <class T>
  void Int(Key k, T* out, const IntRange& range) {
    if (const Value* v = Get(k)) ReadInt(k, *v, range, "an integer", out);
  }

  // JSON null reads as -1 (nullopt).
  template <class T>
  void IntOrNull(Key k, T* out, const IntRange& range) {
    const Value* v = Get(k);
    if (v == nullptr) return;
    if (v->kind != Kind::kNull) return ReadInt(k, *v, range, "an integer or null", out);
    if (out != nullptr) SetNull(out);
  }

  // Absent: *out keeps its default.
  template <class T>
  void OptionalInt(Key k, T* out, const IntRange& range) {
    const Value* v = Find(k);
    if (v != nullptr && ok()) ReadInt(k, *v, range, "an integer", out);
  }

  // Absent or JSON null: -1 (nullopt).
  template <class T>
  void OptionalIntOrNull(Key k, T* out, const IntRange& range) {
    const Value* v = Find(k);
    if (!ok()) return;
    if (v != nullptr && v->kind != Kind::kNull) {
      return ReadInt(k, *v, range, "an integer or null", out);
    }
    if (out != nullptr) SetNull(out);
  }

  void Bool(Key k, bool* out) {
    if (const Value* v = Get(k)) ReadBool(k, *v, out);
  }

  void OptionalBool(Key k, bool* out) {
    const Value* v = Find(k);
    if (v != nullptr && ok()) ReadBool(k, *v, out);
  }

  void OptionalBool(Key k, std::optional<bool>* out) {
    const Value* v = Find(k);
    if (v != nullptr && ok()) ReadBool(k, *v, out == nullptr ? nullptr : &out->emplace());
  }

  void Number(Key k, double* out, int lo, int hi) {
    if (const Value* v = Get(k)) ReadNumber(k, *v, lo, MaximumOf(hi), out);
  }

  void OptionalNumber(Key k, double* out, int lo, int hi) {
    const Value* v = Find(k);
    if (v != nullptr && ok()) ReadNumber(k, *v, lo, MaximumOf(hi), out);
  }

  // Absent: nullopt.
  void OptionalNumber(Key k, std::optional<double>* out, int lo, int hi) {
    const Value* v = Find(k);
    if (v != nullptr && ok()) {
      ReadNumber(k, *v, lo, MaximumOf(hi), out == nullptr ? nullptr : &out->emplace());
    }
  }

  void String(Key k, std::string* out) {
    const Value* v = Get(k);
    if (v == nullptr) return;
    if (v->kind != Kind::kString) return Fail(Reason::kWrongType, k, "must be a string", v);
    if (out != nullptr) SetString(*v, out);
  }

  void OptionalString(Key k, std::string* out) {
    if (ok() && Find(k) != nullptr) String(k, out);
  }

  void Strings(Key k, std::vector<std::string>* out) {
    const Value* v = Get(k);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of strings";
    if (v->kind != Kind::kArray) return Fail(Reason::kWrongType, k, kWhat, v);
    ElementReader items(*v);
    Value item{};
    while (items.Next(&item)) {
      if (item.kind != Kind::kString) return Fail(Reason::kWrongType, k, kWhat, v);
      if (out != nullptr) SetString(item, &out->emplace_back());
    }
  }

  void OptionalStrings(Key k, std::vector<std::string>* out) {
    if (ok() && Find(k) != nullptr) Strings(k, out);
  }

  void Ids(Key k, std::vector<uint64_t>* out) {
    const Value* v = Get(k);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of unsigned integers";
    if (v->kind != Kind::kArray) return Fail(Reason::kWrongType, k, kWhat, v);
    ElementReader items(*v);
    Value item{};
    while (items.Next(&item)) {
      Integral x;
      const IntegralKind kind = ToIntegral(item, &x);
      if (kind == IntegralKind::kNotInteger) return Fail(Reason::kWrongType, k, kWhat, v);
      if (kind == IntegralKind::kTooLarge || !InRange(x, kUint64)) {
        return Fail(Reason::kOutOfRange, k, "must be an array of integers in [0, 2^64-1]", v);
      }
      if (out != nullptr) out->push_back(x.magnitude);
    }
  }

  void Dim(Key k, Dim3* out) {
    if (const Value* v = Get(k)) ReadDim(k, *v, out);
  }

  void OptionalDim(Key k, std::optional<Dim3>* out) {
    const Value* v = Find(k);
    if (v != nullptr && ok()) ReadDim(k, *v, out == nullptr ? nullptr : &out->emplace());
  }

  void OneResource(Key k, Resource* out) {
    if (Get(k) != nullptr) OptionalEnum(k, out, ResourceName, 0, kResourceCount - 1);
  }

  void ResourceSet(Key k, ResourceMask* out) {
    const Value* v = Get(k);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of resource names";
    if (v->kind != Kind::kArray) return Fail(Reason::kWrongType, k, kWhat, v);
    unsigned mask = 0;
    ElementReader items(*v);
    Value item{};
    while (items.Next(&item)) {
      if (item.kind != Kind::kString) return Fail(Reason::kWrongType, k, kWhat, v);
      const int r = ResourceOf(item);
      if (r < 0) return Fail(Reason::kOutOfRange, k, "must hold only resource names", v);
      if (mask & (1u << r)) return Fail(Reason::kOutOfRange, k, "must not repeat a resource", v);
      mask |= 1u << r;
    }
    if (out != nullptr) *out = static_cast<ResourceMask>(mask);
  }

  void OptionalOccupancySource(Key k, OccupancySource* out) {
    OptionalEnum(k, out, OccupancySourceName, 1, 2);
  }

  void OptionalTimingStoppedReason(Key k, TimingStoppedReason* out) {
    OptionalEnum(k, out, TimingStoppedReasonName, 1, 2);
  }

  void OptionalTimingPolicy(Key k, TimingPolicy* out) {
    OptionalEnum(k, out, TimingPolicyName, 1, 3);
  }

  void OneStallState(Key k, StallState* out) {
    if (Get(k) != nullptr) {
      OptionalEnum(k, out, StallStateName, 0, kStallStateCount - 1);
    }
  }

  void OneLostReason(Key k, LostReason* out) {
    if (Get(k) != nullptr) {
      OptionalEnum(k, out, LostReasonName, 0, kLostReasonCount - 1);
    }
  }

  // An array of objects, each checked in order by CheckFields over its own members (the last of
  // a repeated name counts, as at the top level), with the prefix "<prefix>: <key>[i]"; the first
  // fault of any of them is the line's.
  template <class V, class Tag>
  void Objects(Key k, V* out, Tag) {
    const Value* v = Get(k);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of objects";
    if (v->kind != Kind::kArray) return Fail(Reason::kWrongType, k, kWhat, v);
    ElementReader items(*v);
    Value item{};
    uint64_t index = 0;
    while (items.Next(&item)) {
      if (item.kind != Kind::kObject) return Fail(Reason::kWrongType, k, kWhat, v);
      Slots members;
      ElementReader reader(item);
      Value member{};
      std::string_view name;
      bool escaped = false;
      while (reader.Next(&member, &name, &escaped)) {
        const uint8_t key = KeyOfName(name, escaped);
        if (key != kNoKey) members.Set(static_cast<Key>(key), member);
      }
      // "<prefix>: <key>[<index>]", cut to the buffer (only messages read it).
      char prefix[128];
      size_t used = 0;
      const auto append = [&](std::string_view text) {
        const size_t n = std::min(text.size(), sizeof(prefix) - used);
        std::memcpy(prefix + used, text.data(), n);
        used += n;
      };
      append(prefix_);
      append(": ");
      append(kKeyNames[k]);
      append("[");
      char digits[24];
      const auto r = std::to_chars(digits, digits + sizeof(digits), index);
      append(std::string_view(digits, static_cast<size_t>(r.ptr - digits)));
      append("]");
      Checker nested(members, std::string_view(prefix, used), error_);
      if (out == nullptr) {
        CheckFields<false>(nested, static_cast<typename V::value_type*>(nullptr));
      } else {
        CheckFields<true>(nested, &out->emplace_back());
      }
      if (!nested.ok()) {
        reason_ = nested.reason();
        return;
      }
      ++index;
    }
  }

  // An object whose members are strings; a member overridden by a later one of the same name
  // does not count (Decode keeps the last). *out: the members sorted by name (bytewise), each
  // name once with its last value, as a JSON object holds them.
  void OptionalStringMap(Key k, std::vector<std::pair<std::string, std::string>>* out) {
    const Value* v = Find(k);
    if (!ok() || v == nullptr) return;
    constexpr const char* kWhat = "must be an object of strings";
    if (v->kind != Kind::kObject) return Fail(Reason::kWrongType, k, kWhat, v);
    ElementReader members(*v);
    Value item{};
    std::string_view name;
    bool escaped = false;
    while (members.Next(&item, &name, &escaped)) {
      if (item.kind == Kind::kString) {
        if (out != nullptr) {
          auto& [key, value] = out->emplace_back();
          const Value key_text{name.data() - 1, name.data() + name.size() + 1,
                               Kind::kString,   escaped,
                               false,           false,
                               false,           0};
          SetString(key_text, &key);
          SetString(item, &value);
        }
        continue;
      }
      ElementReader later = members;  // the members after this one
      Value other{};
      std::string_view other_name;
      bool other_escaped = false;
      bool overridden = false;
      while (!overridden && later.Next(&other, &other_name, &other_escaped)) {
        overridden = SameName(name, escaped, other_name, other_escaped);
      }
      if (!overridden) return Fail(Reason::kWrongType, k, kWhat, v);
    }
    if (out == nullptr) return;
    std::stable_sort(out->begin(), out->end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    // Of each run of one name, the last.
    const auto last = std::unique(out->rbegin(), out->rend(),
                                  [](const auto& a, const auto& b) { return a.first == b.first; });
    out->erase(out->begin(), last.base());
  }

  void RequiredWith(Key k, Key trigger) {
    if (ok() && Find(trigger) != nullptr && Find(k) == nullptr) {
      reason_ = Reason::kMissingField;
      Message(k).Add("is required when \"").Add(kKeyNames[trigger]).Add("\" is present");
    }
  }

  void Version() {
    const Value* v = Get(k_version);
    if (v == nullptr) return;
    Integral x;
    const IntegralKind kind = ToIntegral(*v, &x);
    if (kind == IntegralKind::kNotInteger) {
      return Fail(Reason::kWrongType, k_version, "must be an integer", v);
    }
    if (kind == IntegralKind::kTooLarge || x.negative ||
        x.magnitude != static_cast<uint64_t>(kSchemaVersion)) {
      reason_ = Reason::kUnsupportedVersion;
      MessageBuilder(error_)
          .Add(prefix_)
          .Add(": version ")
          .Excerpt(v->text())
          .Add(" is not supported (this build reads version ")
          .Number(kSchemaVersion)
          .Add(")");
    }
  }

  // Whether the string value unescapes to `want`.
  static bool StringIs(const Value& v, std::string_view want) {
    return v.escaped ? UnescapedEquals(v.inner(), want) : v.inner() == want;
  }

 private:
  const Value* Find(Key k) const { return slots_.Has(k) ? &slots_.value[k] : nullptr; }

  const Value* Get(Key k) {
    if (!ok()) return nullptr;
    const Value* v = Find(k);
    if (v == nullptr) {
      reason_ = Reason::kMissingField;
      Message(k).Add("is missing");
    }
    return v;
  }

  MessageBuilder Message(Key k) {
    MessageBuilder m(error_);
    m.Add(prefix_).Add(": field \"").Add(kKeyNames[k]).Add("\" ");
    return m;
  }

  void Fail(Reason reason, Key k, std::string_view what, const Value* got) {
    reason_ = reason;
    MessageBuilder m = Message(k);
    m.Add(what);
    if (got != nullptr) m.Add(", got ").Excerpt(got->text());
  }

  // A string naming one of the enumerators [first, last] (`name_of` gives each one's wire name),
  // when present and no fault came before; else the message lists them.
  template <class E>
  void OptionalEnum(Key k, E* out, std::string_view (*name_of)(E), int first, int last) {
    const Value* v = Find(k);
    if (!ok() || v == nullptr) return;
    if (v->kind != Kind::kString) return Fail(Reason::kWrongType, k, "must be a string", v);
    for (int i = first; i <= last; ++i) {
      if (StringIs(*v, name_of(static_cast<E>(i)))) {
        if (out != nullptr) *out = static_cast<E>(i);
        return;
      }
    }
    reason_ = Reason::kOutOfRange;
    MessageBuilder m = Message(k);
    m.Add("must be one of ");
    for (int i = first; i <= last; ++i)
      m.Add(i == first ? "" : ", ").Add(name_of(static_cast<E>(i)));
    m.Add(", got ").Excerpt(v->text());
  }

  void ReadBool(Key k, const Value& v, bool* out) {
    if (v.kind != Kind::kTrue && v.kind != Kind::kFalse) {
      return Fail(Reason::kWrongType, k, "must be a boolean", &v);
    }
    if (out != nullptr) *out = v.kind == Kind::kTrue;
  }

  // The common case inline: an integer written as such, in range.
  template <class T>
  [[gnu::always_inline]] void ReadInt(Key k, const Value& v, const IntRange& range,
                                      const char* what, T* out) {
    if (v.kind == Kind::kNumber && v.integral && InRange({v.negative, v.magnitude}, range)) {
      if (out != nullptr) SetInt(out, {v.negative, v.magnitude});
      return;
    }
    SlowReadInt(k, v, range, what, out);
  }

  template <class T>
  [[gnu::noinline]] void SlowReadInt(Key k, const Value& v, const IntRange& range,
                                     const char* what, T* out) {
    Integral x;
    const IntegralKind kind = ToIntegral(v, &x);
    if (kind == IntegralKind::kNotInteger) {
      reason_ = Reason::kWrongType;
      Message(k).Add("must be ").Add(what).Add(", got ").Excerpt(v.text());
      return;
    }
    if (kind == IntegralKind::kTooLarge || !InRange(x, range)) {
      reason_ = Reason::kOutOfRange;
      Message(k)
          .Add("must be an integer in [")
          .Number(range.lo)
          .Add(", ")
          .Number(range.hi)
          .Add("], got ")
          .Excerpt(v.text());
      return;
    }
    if (out != nullptr) SetInt(out, x);
  }

  void ReadNumber(Key k, const Value& v, double lo, double hi, double* out) {
    if (v.kind == Kind::kNumber && NumberInRange(v, lo, hi)) {
      if (out != nullptr) *out = DoubleOf(v);
      return;
    }
    Fail(v.kind == Kind::kNumber ? Reason::kOutOfRange : Reason::kWrongType, k,
         hi == kInfinity ? "must be a number >= 0" : "must be a number in [0, 1]", &v);
  }

  void ReadDim(Key k, const Value& v, Dim3* out) {
    constexpr const char* kWhat = "must be an array of 3 unsigned integers";
    if (v.kind != Kind::kArray) return Fail(Reason::kWrongType, k, kWhat, &v);
    Value items[3]{};
    int count = 0;
    ElementReader reader(v);
    Value item{};
    while (reader.Next(&item)) {
      if (count == 3) return Fail(Reason::kWrongType, k, kWhat, &v);
      items[count++] = item;
    }
    if (count != 3) return Fail(Reason::kWrongType, k, kWhat, &v);
    uint32_t xyz[3] = {};
    for (int i = 0; i < 3; ++i) {
      Integral x;
      const IntegralKind kind = ToIntegral(items[i], &x);
      if (kind == IntegralKind::kNotInteger) return Fail(Reason::kWrongType, k, kWhat, &v);
      if (kind == IntegralKind::kTooLarge || !InRange(x, kUint32)) {
        return Fail(Reason::kOutOfRange, k, "must be an array of 3 integers in [0, 4294967295]",
                    &v);
      }
      xyz[i] = static_cast<uint32_t>(x.magnitude);
    }
    if (out != nullptr) *out = {xyz[0], xyz[1], xyz[2]};
  }

  // The Resource a string value names, or -1.
  static int ResourceOf(const Value& v) {
    for (int i = 0; i < kResourceCount; ++i) {
      if (StringIs(v, ResourceName(static_cast<Resource>(i)))) return i;
    }
    return -1;
  }

  const Slots& slots_;
  std::string_view prefix_;
  ValidateError* error_;
  Reason reason_ = Reason::kOk;
};

// The checks of the tables (event_fields.h): one call per member, in the table's order, each
// with the member of *e to fill (kFill), or none (only checking; e is then null).
#define CUFLIGHT_CHECK_FIELD(kind, name, member, ...) \
  c.kind(KeyOf(#name), kFill ? &e->member : nullptr __VA_OPT__(, ) __VA_ARGS__);
#define CUFLIGHT_CHECK_RULE(name, trigger) c.RequiredWith(KeyOf(#name), KeyOf(#trigger));
#define CUFLIGHT_CHECK(Struct, TABLE)                        \
  template <bool kFill>                                      \
  void CheckFields(Checker& c, [[maybe_unused]] Struct* e) { \
    TABLE(CUFLIGHT_CHECK_FIELD, CUFLIGHT_CHECK_RULE)         \
  }

// The Owned struct of an event type.
template <EventType kType>
using EventOf = std::variant_alternative_t<static_cast<size_t>(kType), OwnedEvent>;

CUFLIGHT_CHECK(OwnedStallLaunch, CUFLIGHT_SCHEMA_STALL_LAUNCH)
CUFLIGHT_CHECK(OwnedStallStream, CUFLIGHT_SCHEMA_STALL_STREAM)
#define CUFLIGHT_CHECK_TYPE(type, TABLE) CUFLIGHT_CHECK(EventOf<EventType::type>, TABLE)
CUFLIGHT_SCHEMA_EVENT_TABLES(CUFLIGHT_CHECK_TYPE)

// The fields of an event of type kType, into a new event in *event (out of line: the checks
// alone stay as they were without it).
template <EventType kType>
[[gnu::noinline]] void CheckAndFill(Checker& c, const Header& header, OwnedEvent* event) {
  using E = EventOf<kType>;
  E& e = event->emplace<E>();
  e.header = header;
  CheckFields<true>(c, &e);
  if constexpr (kType == EventType::kKernel || kType == EventType::kKernelConfig) {
    e.occupancy.has_cluster = c.Has(KeyOf("cluster_occupancy"));
  }
}

// The fields of an event of type kType; into a new event in *event when not null.
template <EventType kType>
void CheckEvent(Checker& c, const Header& header, OwnedEvent* event) {
  if (event != nullptr) return CheckAndFill<kType>(c, header, event);
  CheckFields<false>(c, static_cast<EventOf<kType>*>(nullptr));
}

// The EventType a `type` string value names, or nullopt.
std::optional<EventType> TypeOfValue(const Value& v) {
  if (!v.escaped) return EventTypeFromName(v.inner());
  for (int i = 0; i < kEventTypeCount; ++i) {
    const auto type = static_cast<EventType>(i);
    if (UnescapedEquals(v.inner(), EventTypeName(type))) return type;
  }
  return std::nullopt;
}

Reason Malformed(const Lexer& lexer, std::string_view line, const char* at, const char* what,
                 ValidateError* error) {
  if (error != nullptr) {
    if (at == nullptr) {
      at = lexer.fail_at();
      what = lexer.fail_what();
    }
    MessageBuilder(error)
        .Add("malformed JSON at byte ")
        .Number(at == nullptr ? line.size() : static_cast<size_t>(at - line.data()))
        .Add(": ")
        .Add(what);
  }
  return Reason::kMalformedJson;
}

// The facts of an accepted line (LineInfo::fact_*), from its slots.
void RecordFacts(const Slots& slots, LineInfo* info) {
  info->fact_present = 0;
  info->fact_escaped = 0;
  for (size_t f = 0; f < kFactKeys.size(); ++f) {
    const Key k = kFactKeys[f];
    if (!slots.Has(k)) continue;
    const Value& v = slots.value[k];
    info->fact_present |= 1u << f;
    info->fact_raw[f] = v.text();
    Integral x;
    if (v.kind == Kind::kNumber && ToIntegral(v, &x) == IntegralKind::kOk) {
      info->fact_value[f] = x.negative ? 0 - x.magnitude : x.magnitude;
    }
    if (v.kind == Kind::kString && v.escaped) info->fact_escaped |= 1u << f;
  }
}

// Validate with a LineInfo to fill and, for a type in `decode` (bit 1 << type), the event to
// fill (Decode). May throw std::bad_alloc, only when it fills an event.
Reason ValidateInto(std::string_view line, LineInfo* info, ValidateError* error, uint32_t decode,
                    OwnedEvent* event) {
  info->line = line;
  info->type_known = false;
  info->type_text = {};
  info->header_valid = false;

  const char* p = line.data();
  const char* const end = p + line.size();
  Lexer lexer(end);
  if (line.size() >= 3 && std::memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;  // as nlohmann does
  p = lexer.SkipSpace(p);
  if (p == end) return Malformed(lexer, line, p, "no JSON value", error);
  if (*p != '{') {
    Value v{};
    p = lexer.ScanValue(p, 1, &v);
    if (p == nullptr) return Malformed(lexer, line, nullptr, nullptr, error);
    p = lexer.SkipSpace(p);
    if (p != end) return Malformed(lexer, line, p, "text after the JSON value", error);
    MessageBuilder(error).Add("event is not a JSON object");
    return Reason::kNotAnObject;
  }

  Slots slots;
  p = lexer.SkipSpace(p + 1);
  if (p < end && *p == '}') {
    ++p;
  } else {
    while (true) {
      if (p == end || *p != '"') return Malformed(lexer, line, p, "expected a member name", error);
      const char* const key_begin = p + 1;
      bool key_escaped = false;
      p = lexer.ScanString(key_begin, &key_escaped);
      if (p == nullptr) return Malformed(lexer, line, nullptr, nullptr, error);
      const std::string_view key(key_begin, static_cast<size_t>(p - 1 - key_begin));
      // Fast paths for the encoder's layout (no whitespace) before each SkipSpace.
      if (p == end || *p != ':') {
        p = lexer.SkipSpace(p);
        if (p == end || *p != ':') return Malformed(lexer, line, p, "expected ':'", error);
      }
      ++p;
      if (p == end || static_cast<unsigned char>(*p) <= ' ') {
        p = lexer.SkipSpace(p);
        if (p == end) return Malformed(lexer, line, p, "unexpected end", error);
      }
      Value v;
      p = lexer.ScanValue(p, 2, &v);
      if (p == nullptr) return Malformed(lexer, line, nullptr, nullptr, error);

      const uint8_t k = KeyOfName(key, key_escaped);
      if (k != kNoKey) slots.Set(static_cast<Key>(k), v);

      if (p < end && *p == ',') {
        ++p;
        if (p == end || *p != '"') p = lexer.SkipSpace(p);
        continue;
      }
      p = lexer.SkipSpace(p);
      if (p == end) return Malformed(lexer, line, p, "unexpected end", error);
      if (*p == ',') {
        p = lexer.SkipSpace(p + 1);
        continue;
      }
      if (*p != '}') return Malformed(lexer, line, p, "expected ',' or '}'", error);
      ++p;
      break;
    }
  }
  p = lexer.SkipSpace(p);
  if (p != end) return Malformed(lexer, line, p, "text after the JSON object", error);

  // The common fields, then the type, then its own fields: Decode's order.
  Checker common(slots, "event", error);
  common.String(k_type, nullptr);
  if (!common.ok()) return common.reason();
  if (!slots.value[k_type].escaped) info->type_text = slots.value[k_type].inner();
  const std::optional<EventType> type = TypeOfValue(slots.value[k_type]);
  Checker c(slots, type ? EventTypeName(*type) : "event", error);
  c.Version();
  Header header;
#define CUFLIGHT_CHECK_HEADER(kind, name, member, range) \
  c.kind(KeyOf(#name), &header.member, range);
  CUFLIGHT_SCHEMA_HEADER(CUFLIGHT_CHECK_HEADER, CUFLIGHT_CHECK_RULE)
  if (!c.ok()) return c.reason();
  info->header = header;
  info->header_valid = true;
  if (!type) {
    MessageBuilder(error).Add("event: unknown type ").Excerpt(slots.value[k_type].text());
    return Reason::kUnknownType;
  }
  info->type = *type;
  info->type_known = true;
  switch (*type) {
#define CUFLIGHT_CHECK_CASE(type, TABLE)                                                         \
  case EventType::type:                                                                          \
    CheckEvent<EventType::type>(c, header, decode & TypeBit(EventType::type) ? event : nullptr); \
    break;
    CUFLIGHT_SCHEMA_EVENT_TABLES(CUFLIGHT_CHECK_CASE)
  }
  if (c.ok()) RecordFacts(slots, info);
  return c.reason();
}

}  // namespace

bool LineInfo::Text(Fact f, char* scratch, size_t cap, std::string_view* out) const {
  const std::string_view raw = Raw(f);
  if (raw.size() < 2 || raw.front() != '"') return false;
  const std::string_view inner = raw.substr(1, raw.size() - 2);
  if (((fact_escaped >> static_cast<int>(f)) & 1) == 0) {
    *out = inner;
    return true;
  }
  const std::optional<size_t> n = Unescape(inner, scratch, cap);
  if (!n) return false;
  *out = std::string_view(scratch, *n);
  return true;
}

namespace internal {

bool ValidateFastPath(std::string_view line, LineInfo* info) noexcept {
  return fast_path::AcceptEncoderLayout(line, info);
}

bool DecodeFastPath(std::string_view line, LineInfo* info, OwnedKernelEvent* e) {
  return fast_path::DecodeEncoderLayout(line, info, e);
}

bool DecodeFastPath(std::string_view line, LineInfo* info, OwnedKernelTimeEvent* e) {
  return fast_path::DecodeEncoderLayout(line, info, e);
}

bool DecodeFastPath(std::string_view line, LineInfo* info, OwnedLaunchEvent* e) {
  return fast_path::DecodeEncoderLayout(line, info, e);
}

Reason ValidateGeneralPath(std::string_view line, LineInfo* info, ValidateError* error) noexcept {
  if (info == nullptr) {
    LineInfo local;
    return ValidateInto(line, &local, error, 0, nullptr);
  }
  return ValidateInto(line, info, error, 0, nullptr);
}

Reason DecodeGeneralPath(std::string_view line, LineInfo* info, ValidateError* error,
                         OwnedEvent* event) {
  return ValidateInto(line, info, error, ~uint32_t{0}, event);
}

}  // namespace internal

Reason Validate(std::string_view line, LineInfo* info, ValidateError* error) noexcept {
  if (info == nullptr) {
    LineInfo local;
    return Validate(line, &local, error);
  }
  // The encoder's own layout first; the general path for everything else, and for the verdict
  // and message of every line the fast path does not accept.
  if (internal::fast_path::AcceptEncoderLayout(line, info)) return Reason::kOk;
  return ValidateInto(line, info, error, 0, nullptr);
}

Reason Validate(std::string_view line, LineInfo* info, ValidateError* error, uint32_t decode,
                OwnedEvent* event) noexcept {
  if (info == nullptr || event == nullptr) return Validate(line, info, error);
  const bool accepted = internal::fast_path::AcceptEncoderLayout(line, info);
  if (accepted && ((decode >> static_cast<int>(info->type)) & 1) == 0) return Reason::kOk;
  // The fast path does not decode: a line of a type to decode goes through the general path.
  try {
    return ValidateInto(line, info, error, decode, event);
  } catch (...) {  // std::bad_alloc, filling the event
    MessageBuilder(error).Add("out of memory");
    return Reason::kInternalError;
  }
}

DecodeResult Decode(std::string_view line) noexcept {
  DecodeResult result;
  try {
    LineInfo info;
    ValidateError error;
    result.reason = ValidateInto(line, &info, &error, ~uint32_t{0}, &result.event);
    if (info.header_valid) result.header = info.header;
    if (!result.ok()) result.message.assign(error.message());
  } catch (...) {  // std::bad_alloc, filling the event
    result.reason = Reason::kInternalError;
    result.message = "out of memory";  // fits the small-string buffer: no allocation
  }
  return result;
}

}  // namespace cuflight::schema
