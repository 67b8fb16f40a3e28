#include "reference_decoder.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuflight/schema/event_fields.h"

namespace cuflight::test_support {
namespace {

// The reference reads like the codec it checks.
using namespace cuflight::schema;  // NOLINT(google-build-using-namespace)

using nlohmann::json;

constexpr size_t kMaxExcerpt = 48;
constexpr size_t kMaxMessage = 240;

// An integral JSON number: -magnitude when negative, else magnitude. JSON Schema counts a number
// with a zero fraction (2.0) as an integer, so the decoder does too.
struct Integral {
  bool negative = false;
  uint64_t magnitude = 0;
};

enum class IntegralKind { kOk, kNotInteger, kTooLarge };

IntegralKind ToIntegral(const json& v, Integral* out) {
  switch (v.type()) {
    case json::value_t::number_unsigned:
      *out = {false, v.get<uint64_t>()};
      return IntegralKind::kOk;
    case json::value_t::number_integer: {
      const auto i = v.get<int64_t>();
      *out = {i < 0, i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i)};
      return IntegralKind::kOk;
    }
    case json::value_t::number_float: {
      const auto d = v.get<double>();
      if (!std::isfinite(d) || std::trunc(d) != d) return IntegralKind::kNotInteger;
      if (std::fabs(d) >= 18446744073709551616.0) return IntegralKind::kTooLarge;  // 2^64
      *out = {d < 0, static_cast<uint64_t>(std::fabs(d))};
      return IntegralKind::kOk;
    }
    default:
      return IntegralKind::kNotInteger;
  }
}

bool InRange(const Integral& x, const IntRange& r) {
  if (x.negative) return r.lo < 0 && x.magnitude <= 0 - static_cast<uint64_t>(r.lo);
  return x.magnitude <= r.hi && (r.lo <= 0 || x.magnitude >= static_cast<uint64_t>(r.lo));
}

// `x` must be in the range of T.
template <class T>
T ValueOf(const Integral& x) {
  if (x.negative) return static_cast<T>(static_cast<int64_t>(0 - x.magnitude));
  return static_cast<T>(x.magnitude);
}

std::string RangeText(const char* what, const IntRange& r) {
  return std::string(what) + " in [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]";
}

// A bound for messages: 0 rather than 0.0.
std::string NumberText(double d) {
  if (std::trunc(d) == d && std::fabs(d) < 1e15) return std::to_string(static_cast<int64_t>(d));
  return json(d).dump();
}

// A short ASCII rendering of `v` for messages.
std::string Excerpt(const json& v) {
  std::string text;
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    text = json(s.substr(0, kMaxExcerpt)).dump(-1, ' ', true, json::error_handler_t::replace);
  } else if ((v.is_array() || v.is_object()) && v.size() > 8) {
    return std::string(v.is_array() ? "an array of " : "an object of ") + std::to_string(v.size()) +
           " items";
  } else {
    text = v.dump(-1, ' ', true, json::error_handler_t::replace);
  }
  if (text.size() > kMaxExcerpt) {
    text.resize(kMaxExcerpt - 3);
    text += "...";
  }
  return text;
}

class Reader;
void Read(Reader& r, OwnedStallLaunch* l);
void Read(Reader& r, OwnedStallStream* s);

// Reads the fields of one JSON object into a DecodeResult. The first failure is recorded in the
// result; every later read is a no-op.
class Reader {
 public:
  Reader(const json& object, std::string_view prefix, DecodeResult* result)
      : object_(object), prefix_(prefix), result_(result) {}

  bool ok() const { return result_->reason == Reason::kOk; }

  template <class T>
  void Int(const char* key, T* out, const IntRange& range) {
    if (const json* v = Get(key)) ReadInt(key, *v, range, "an integer", out);
  }

  // JSON null reads as -1.
  template <class T>
  void IntOrNull(const char* key, T* out, const IntRange& range) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (v->is_null()) {
      *out = T{-1};
      return;
    }
    ReadInt(key, *v, range, "an integer or null", out);
  }

  // Absent: *out keeps its value.
  template <class T>
  void OptionalInt(const char* key, T* out, const IntRange& range) {
    const json* v = Find(key);
    if (v != nullptr && ok()) ReadInt(key, *v, range, "an integer", out);
  }

  // Absent: *out is reset.
  template <class T>
  void OptionalInt(const char* key, std::optional<T>* out, const IntRange& range) {
    const json* v = Find(key);
    if (v == nullptr || !ok()) {
      out->reset();
      return;
    }
    T value{};
    ReadInt(key, *v, range, "an integer", &value);
    *out = value;
  }

  // Absent or JSON null: -1.
  template <class T>
  void OptionalIntOrNull(const char* key, T* out, const IntRange& range) {
    const json* v = Find(key);
    if (!ok()) return;
    if (v == nullptr || v->is_null()) {
      *out = T{-1};
      return;
    }
    ReadInt(key, *v, range, "an integer or null", out);
  }

  // Absent: false.
  void Bool(const char* key, bool* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail(Reason::kWrongType, key, "must be a boolean", v);
    *out = v->get<bool>();
  }

  void OptionalBool(const char* key, bool* out) {
    const json* v = Find(key);
    if (!ok()) return;
    if (v == nullptr) {
      *out = false;
      return;
    }
    if (!v->is_boolean()) return Fail(Reason::kWrongType, key, "must be a boolean", v);
    *out = v->get<bool>();
  }

  // Absent: nullopt.
  void OptionalBool(const char* key, std::optional<bool>* out) {
    const json* v = Find(key);
    if (!ok()) return;
    if (v == nullptr) {
      out->reset();
      return;
    }
    if (!v->is_boolean()) return Fail(Reason::kWrongType, key, "must be a boolean", v);
    *out = v->get<bool>();
  }

  void OptionalTimingPolicy(const char* key, TimingPolicy* out) {
    const json* v = Find(key);
    if (v == nullptr || !ok()) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<TimingPolicy> p = TimingPolicyFromName(v->get_ref<const std::string&>());
    if (!p) return Fail(Reason::kOutOfRange, key, "must be one of all, sampled, off", v);
    *out = *p;
  }

  // An object of strings; absent: empty. The members come out sorted by name (the JSON object's
  // order here), a repeated name with its last value.
  void OptionalStringMap(const char* key, std::vector<std::pair<std::string, std::string>>* out) {
    const json* v = Find(key);
    if (!ok()) return;
    out->clear();
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an object of strings";
    if (!v->is_object()) return Fail(Reason::kWrongType, key, kWhat, v);
    out->reserve(v->size());
    for (const auto& [name, value] : v->items()) {
      if (!value.is_string()) return Fail(Reason::kWrongType, key, kWhat, v);
      out->emplace_back(name, value.get_ref<const std::string&>());
    }
  }

  void OptionalOccupancySource(const char* key, OccupancySource* out) {
    const json* v = Find(key);
    if (v == nullptr || !ok()) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<OccupancySource> s =
        OccupancySourceFromName(v->get_ref<const std::string&>());
    if (!s) return Fail(Reason::kOutOfRange, key, "must be one of driver, engine", v);
    *out = *s;
  }

  void OptionalTimingStoppedReason(const char* key, TimingStoppedReason* out) {
    const json* v = Find(key);
    if (v == nullptr || !ok()) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<TimingStoppedReason> r =
        TimingStoppedReasonFromName(v->get_ref<const std::string&>());
    if (!r) return Fail(Reason::kOutOfRange, key, "must be one of records_stopped, unavailable", v);
    *out = *r;
  }

  void OneLostReason(const char* key, LostReason* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<LostReason> r = LostReasonFromName(v->get_ref<const std::string&>());
    if (!r) {
      return Fail(Reason::kOutOfRange, key, "must be one of disconnected, collector_shutdown", v);
    }
    *out = *r;
  }

  void OneStallState(const char* key, StallState* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<StallState> state = StallStateFromName(v->get_ref<const std::string&>());
    if (!state) return Fail(Reason::kOutOfRange, key, "must be one of stalled, resolved", v);
    *out = *state;
  }

  // An array of objects, each read by Read(Reader&, T*) (its table) with the prefix
  // "<prefix>: <key>[i]", in order; the first fault of any of them is the line's.
  template <class T, class Tag>
  void Objects(const char* key, std::vector<T>* out, Tag) {
    const json* v = Get(key);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of objects";
    if (!v->is_array()) return Fail(Reason::kWrongType, key, kWhat, v);
    out->clear();
    out->reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      const json& item = (*v)[i];
      if (!item.is_object()) return Fail(Reason::kWrongType, key, kWhat, v);
      const std::string prefix = std::string(prefix_) + ": " + key + "[" + std::to_string(i) + "]";
      Reader nested(item, prefix, result_);
      Read(nested, &out->emplace_back());
      if (!ok()) return;
    }
  }

  template <class T>
  void IntOrNull(const char* key, std::optional<T>* out, const IntRange& range) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (v->is_null()) {
      out->reset();
      return;
    }
    T value{};
    ReadInt(key, *v, range, "an integer or null", &value);
    *out = value;
  }

  void Number(const char* key, double* out, int lo, int hi) {
    if (const json* v = Get(key)) ReadNumber(key, *v, lo, MaximumOf(hi), out);
  }

  void OptionalNumber(const char* key, double* out, int lo, int hi) {
    const json* v = Find(key);
    if (v != nullptr && ok()) ReadNumber(key, *v, lo, MaximumOf(hi), out);
  }

  void OptionalNumber(const char* key, std::optional<double>* out, int lo, int hi) {
    const json* v = Find(key);
    if (v != nullptr && ok()) ReadNumber(key, *v, lo, MaximumOf(hi), &out->emplace());
  }

  bool Has(const char* key) const { return Find(key) != nullptr; }

  void String(const char* key, std::string* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    *out = v->get_ref<const std::string&>();
  }

  void OptionalString(const char* key, std::string* out) {
    const json* v = Find(key);
    if (!ok()) return;
    out->clear();
    if (v == nullptr) return;
    String(key, out);
  }

  void Strings(const char* key, std::vector<std::string>* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of strings";
    if (!v->is_array()) return Fail(Reason::kWrongType, key, kWhat, v);
    out->clear();
    out->reserve(v->size());
    for (const json& item : *v) {
      if (!item.is_string()) return Fail(Reason::kWrongType, key, kWhat, v);
      out->push_back(item.get_ref<const std::string&>());
    }
  }

  // Absent: empty.
  void OptionalStrings(const char* key, std::vector<std::string>* out) {
    const json* v = Find(key);
    if (!ok()) return;
    out->clear();
    if (v == nullptr) return;
    Strings(key, out);
  }

  void Ids(const char* key, std::vector<uint64_t>* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of unsigned integers";
    if (!v->is_array()) return Fail(Reason::kWrongType, key, kWhat, v);
    out->clear();
    out->reserve(v->size());
    for (const json& item : *v) {
      Integral x;
      const IntegralKind kind = ToIntegral(item, &x);
      if (kind == IntegralKind::kNotInteger) return Fail(Reason::kWrongType, key, kWhat, v);
      if (kind == IntegralKind::kTooLarge || !InRange(x, kUint64)) {
        return Fail(Reason::kOutOfRange, key,
                    "must be an array of " + RangeText("integers", kUint64), v);
      }
      out->push_back(ValueOf<uint64_t>(x));
    }
  }

  void Dim(const char* key, Dim3* out) {
    if (const json* v = Get(key)) ReadDim(key, *v, out);
  }

  void OptionalDim(const char* key, std::optional<Dim3>* out) {
    const json* v = Find(key);
    if (v == nullptr || !ok()) {
      out->reset();
      return;
    }
    ReadDim(key, *v, &out->emplace());
  }

  void OneResource(const char* key, Resource* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(Reason::kWrongType, key, "must be a string", v);
    const std::optional<Resource> r = ResourceFromName(v->get_ref<const std::string&>());
    if (!r) return Fail(Reason::kOutOfRange, key, "must be one of " + ResourceList(), v);
    *out = *r;
  }

  void ResourceSet(const char* key, ResourceMask* out) {
    const json* v = Get(key);
    if (v == nullptr) return;
    constexpr const char* kWhat = "must be an array of resource names";
    if (!v->is_array()) return Fail(Reason::kWrongType, key, kWhat, v);
    ResourceMask mask = 0;
    for (const json& item : *v) {
      if (!item.is_string()) return Fail(Reason::kWrongType, key, kWhat, v);
      const std::optional<Resource> r = ResourceFromName(item.get_ref<const std::string&>());
      if (!r) return Fail(Reason::kOutOfRange, key, "must hold only " + ResourceList(), v);
      if (mask & MaskOf(*r)) return Fail(Reason::kOutOfRange, key, "must not repeat a resource", v);
      mask = static_cast<ResourceMask>(mask | MaskOf(*r));
    }
    *out = mask;
  }

  // `key` must be present when `trigger` is (JSON Schema dependentRequired).
  void RequiredWith(const char* key, const char* trigger) {
    if (ok() && Find(trigger) != nullptr && Find(key) == nullptr) {
      Fail(Reason::kMissingField, key,
           std::string("is required when \"") + trigger + "\" is present", nullptr);
    }
  }

  // `version`: an integer, equal to kSchemaVersion.
  void Version() {
    const json* v = Get("version");
    if (v == nullptr) return;
    Integral x;
    const IntegralKind kind = ToIntegral(*v, &x);
    if (kind == IntegralKind::kNotInteger) {
      return Fail(Reason::kWrongType, "version", "must be an integer", v);
    }
    if (kind == IntegralKind::kTooLarge || x.negative ||
        x.magnitude != static_cast<uint64_t>(kSchemaVersion)) {
      SetError(Reason::kUnsupportedVersion, std::string(prefix_) + ": version " + Excerpt(*v) +
                                                " is not supported (this build reads version " +
                                                std::to_string(kSchemaVersion) + ")");
    }
  }

  void SetError(Reason reason, std::string message) {
    result_->reason = reason;
    if (message.size() > kMaxMessage) {
      message.resize(kMaxMessage - 3);
      message += "...";
    }
    result_->message = std::move(message);
  }

 private:
  const json* Find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  // The field, or nullptr when it is missing (recorded) or an error is already recorded.
  const json* Get(const char* key) {
    if (!ok()) return nullptr;
    const json* v = Find(key);
    if (v == nullptr) Fail(Reason::kMissingField, key, "is missing", nullptr);
    return v;
  }

  void Fail(Reason reason, const char* key, std::string_view what, const json* got) {
    std::string message = std::string(prefix_) + ": field \"" + key + "\" ";
    message += what;
    if (got != nullptr) message += ", got " + Excerpt(*got);
    SetError(reason, std::move(message));
  }

  template <class T>
  void ReadInt(const char* key, const json& v, const IntRange& range, const char* what, T* out) {
    Integral x;
    const IntegralKind kind = ToIntegral(v, &x);
    if (kind == IntegralKind::kNotInteger) {
      return Fail(Reason::kWrongType, key, std::string("must be ") + what, &v);
    }
    if (kind == IntegralKind::kTooLarge || !InRange(x, range)) {
      return Fail(Reason::kOutOfRange, key, "must be " + RangeText("an integer", range), &v);
    }
    *out = ValueOf<T>(x);
  }

  void ReadNumber(const char* key, const json& v, double lo, double hi, double* out) {
    if (v.is_number()) {
      const auto d = v.get<double>();
      if (d >= lo && d <= hi) {
        *out = d;
        return;
      }
    }
    const std::string what =
        hi == kInfinity ? "must be a number >= " + NumberText(lo)
                        : "must be a number in [" + NumberText(lo) + ", " + NumberText(hi) + "]";
    Fail(v.is_number() ? Reason::kOutOfRange : Reason::kWrongType, key, what, &v);
  }

  void ReadDim(const char* key, const json& v, Dim3* out) {
    constexpr const char* kWhat = "must be an array of 3 unsigned integers";
    if (!v.is_array() || v.size() != 3) return Fail(Reason::kWrongType, key, kWhat, &v);
    uint32_t xyz[3] = {};
    for (size_t i = 0; i < 3; ++i) {
      Integral x;
      const IntegralKind kind = ToIntegral(v[i], &x);
      if (kind == IntegralKind::kNotInteger) return Fail(Reason::kWrongType, key, kWhat, &v);
      if (kind == IntegralKind::kTooLarge || !InRange(x, kUint32)) {
        return Fail(Reason::kOutOfRange, key,
                    "must be an array of 3 " + RangeText("integers", kUint32), &v);
      }
      xyz[i] = ValueOf<uint32_t>(x);
    }
    *out = {xyz[0], xyz[1], xyz[2]};
  }

  static std::string ResourceList() {
    std::string list;
    for (int i = 0; i < kResourceCount; ++i) {
      if (i > 0) list += ", ";
      list += ResourceName(static_cast<Resource>(i));
    }
    return list;
  }

  const json& object_;
  std::string_view prefix_;
  DecodeResult* result_;
};

// The readers of the tables (event_fields.h): one call per member, in the table's order.
#define CUFLIGHT_DECODE_FIELD(kind, name, member, ...) \
  r.kind(#name, &e->member __VA_OPT__(, ) __VA_ARGS__);
#define CUFLIGHT_DECODE_RULE(name, trigger) r.RequiredWith(#name, #trigger);
#define CUFLIGHT_DECODE(Struct, TABLE) \
  void Read(Reader& r, Struct* e) { TABLE(CUFLIGHT_DECODE_FIELD, CUFLIGHT_DECODE_RULE) }

CUFLIGHT_DECODE(OwnedStallLaunch, CUFLIGHT_SCHEMA_STALL_LAUNCH)
CUFLIGHT_DECODE(OwnedStallStream, CUFLIGHT_SCHEMA_STALL_STREAM)
CUFLIGHT_DECODE(OwnedProcessStartEvent, CUFLIGHT_SCHEMA_PROCESS_START)
CUFLIGHT_DECODE(OwnedDeviceEvent, CUFLIGHT_SCHEMA_DEVICE)
CUFLIGHT_DECODE(OwnedKernelTimeEvent, CUFLIGHT_SCHEMA_KERNEL_TIME)
CUFLIGHT_DECODE(OwnedApiErrorEvent, CUFLIGHT_SCHEMA_API_ERROR)
CUFLIGHT_DECODE(OwnedStatsEvent, CUFLIGHT_SCHEMA_STATS)
CUFLIGHT_DECODE(OwnedProcessEndEvent, CUFLIGHT_SCHEMA_PROCESS_END)
CUFLIGHT_DECODE(OwnedProcessLostEvent, CUFLIGHT_SCHEMA_PROCESS_LOST)
CUFLIGHT_DECODE(OwnedProcessCrashEvent, CUFLIGHT_SCHEMA_PROCESS_CRASH)
CUFLIGHT_DECODE(OwnedStallEvent, CUFLIGHT_SCHEMA_STALL)
CUFLIGHT_DECODE(OwnedLaunchEvent, CUFLIGHT_SCHEMA_LAUNCH)

void Read(Reader& r, OwnedKernelEvent* e) {
  CUFLIGHT_SCHEMA_KERNEL(CUFLIGHT_DECODE_FIELD, CUFLIGHT_DECODE_RULE)
  e->occupancy.has_cluster = r.Has("cluster_occupancy");
}

void Read(Reader& r, OwnedKernelConfigEvent* e) {
  CUFLIGHT_SCHEMA_KERNEL_CONFIG(CUFLIGHT_DECODE_FIELD, CUFLIGHT_DECODE_RULE)
  e->occupancy.has_cluster = r.Has("cluster_occupancy");
}

void ReadHeader(Reader& r, Header* e) {
  CUFLIGHT_SCHEMA_HEADER(CUFLIGHT_DECODE_FIELD, CUFLIGHT_DECODE_RULE)
}

template <class T>
void ReadEvent(Reader& r, const Header& header, OwnedEvent* out) {
  T& e = out->emplace<T>();
  e.header = header;
  Read(r, &e);
}

// nlohmann's parse error text without its "[json.exception...] " tag, with non-ASCII bytes
// (from the input) replaced by '?'.
std::string ParseErrorText(const char* what) {
  std::string_view text(what);
  if (const size_t tag_end = text.find("] "); tag_end != std::string_view::npos) {
    text.remove_prefix(tag_end + 2);
  }
  std::string out = "malformed JSON: ";
  for (const char c : text.substr(0, kMaxMessage)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7F) ? '?' : c;
  }
  return out;
}

// Limits nlohmann does not enforce: no NUL byte anywhere (its lexer reads one as the end of the
// input and would accept `{...}\0garbage`), arrays and objects nested at most kMaxNestingDepth
// deep. Returns the problem, or nullptr. Brackets inside strings do not count; on a line that is
// not JSON the count may be off, but such a line is malformed either way.
const char* CheckLimits(std::string_view line) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\0') return "NUL byte";
    if (in_string) {
      if (c == '\\') {
        ++i;
        if (i < line.size() && line[i] == '\0') return "NUL byte";
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNestingDepth) return "nested too deep";
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return nullptr;
}

void DecodeInto(std::string_view line, DecodeResult* result) {
  if (const char* problem = CheckLimits(line)) {
    result->reason = Reason::kMalformedJson;
    result->message = std::string("malformed JSON: ") + problem;
    return;
  }
  json doc;
  try {
    doc = json::parse(line);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond double
    result->reason = Reason::kMalformedJson;
    result->message = ParseErrorText(e.what());
    return;
  }
  if (!doc.is_object()) {
    result->reason = Reason::kNotAnObject;
    result->message = std::string("event is not a JSON object, got ") + doc.type_name();
    return;
  }

  std::string type_name;
  Reader(doc, "event", result).String("type", &type_name);
  if (!result->ok()) return;
  const std::optional<EventType> type = EventTypeFromName(type_name);
  Reader r(doc, type ? EventTypeName(*type) : "event", result);
  r.Version();
  Header header;
  ReadHeader(r, &header);
  if (!r.ok()) return;
  result->header = header;
  if (!type) {
    r.SetError(Reason::kUnknownType, "event: unknown type " + Excerpt(json(type_name)));
    return;
  }

  switch (*type) {
    case EventType::kProcessStart:
      return ReadEvent<OwnedProcessStartEvent>(r, header, &result->event);
    case EventType::kDevice:
      return ReadEvent<OwnedDeviceEvent>(r, header, &result->event);
    case EventType::kKernel:
      return ReadEvent<OwnedKernelEvent>(r, header, &result->event);
    case EventType::kKernelTime:
      return ReadEvent<OwnedKernelTimeEvent>(r, header, &result->event);
    case EventType::kApiError:
      return ReadEvent<OwnedApiErrorEvent>(r, header, &result->event);
    case EventType::kStats:
      return ReadEvent<OwnedStatsEvent>(r, header, &result->event);
    case EventType::kProcessEnd:
      return ReadEvent<OwnedProcessEndEvent>(r, header, &result->event);
    case EventType::kProcessLost:
      return ReadEvent<OwnedProcessLostEvent>(r, header, &result->event);
    case EventType::kProcessCrash:
      return ReadEvent<OwnedProcessCrashEvent>(r, header, &result->event);
    case EventType::kStall:
      return ReadEvent<OwnedStallEvent>(r, header, &result->event);
    case EventType::kKernelConfig:
      return ReadEvent<OwnedKernelConfigEvent>(r, header, &result->event);
    case EventType::kLaunch:
      return ReadEvent<OwnedLaunchEvent>(r, header, &result->event);
  }
}

}  // namespace

schema::DecodeResult ReferenceDecode(std::string_view line) noexcept {
  schema::DecodeResult result;
  try {
    DecodeInto(line, &result);
  } catch (const std::bad_alloc&) {
    result.reason = schema::Reason::kInternalError;
    result.message = "out of memory";  // fits the small-string buffer: no allocation
  } catch (...) {
    result.reason = schema::Reason::kInternalError;
    result.message = "internal error";
  }
  return result;
}

}  // namespace cuflight::test_support
