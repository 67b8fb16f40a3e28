// LineDecoder: Validate, then the typed fields of a kernel or kernel_time line read from the
// member texts Validate recorded; Decode for everything else.
#include "cuflight/schema/line_decoder.h"

#include "cuflight/schema/event_fields.h"
#include "validator_internal.h"

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

namespace cuflight::schema {
namespace {

// ---- Readers of one checked value's text. Each returns false for a form it does not take; the
// line then goes to Decode, which takes every valid form. ----

bool IsIntegerText(std::string_view raw) {
  size_t i = raw.size() > 1 && raw[0] == '-' ? 1 : 0;
  if (i == raw.size()) return false;
  for (; i < raw.size(); ++i) {
    if (raw[i] < '0' || raw[i] > '9') return false;
  }
  return true;
}

// An integer member. Validate checked the range the schema gives it, which fits T, so the digits
// accumulate without overflow (at most 20 of them: 2^64 - 1).
template <class T>
bool ReadInt(std::string_view raw, T* out) {
  const bool negative = !raw.empty() && raw[0] == '-';
  const size_t first = negative ? 1 : 0;
  if (raw.size() == first || raw.size() - first > 20) return false;
  uint64_t magnitude = 0;
  for (size_t i = first; i < raw.size(); ++i) {
    const unsigned digit = static_cast<unsigned char>(raw[i]) - unsigned{'0'};
    if (digit > 9) return false;  // e.g. 2.0 or 1e3: Decode's ToIntegral rules
    magnitude = magnitude * 10 + digit;
  }
  if constexpr (std::is_unsigned_v<T>) {
    if (negative) return magnitude == 0 ? (*out = 0, true) : false;
    *out = static_cast<T>(magnitude);
  } else {
    *out = negative ? static_cast<T>(static_cast<int64_t>(0 - magnitude))
                    : static_cast<T>(static_cast<int64_t>(magnitude));
  }
  return true;
}

template <class T>
bool ReadOptionalInt(std::string_view raw, std::optional<T>* out) {
  T v{};
  if (!ReadInt(raw, &v)) return false;
  *out = v;
  return true;
}

// JSON null reads as `null_value` (Decode's IntOrNull).
template <class T>
bool ReadIntOrNull(std::string_view raw, T null_value, T* out) {
  if (raw == "null") {
    *out = null_value;
    return true;
  }
  return ReadInt(raw, out);
}

// A number as nlohmann/json reads it: an integer literal that fits 64 bits is an integer, and
// get<double>() converts it (so "-0" is +0.0); any other number is strtod's correctly rounded
// double, which from_chars gives too.
bool ReadDouble(std::string_view raw, double* out) {
  const bool negative = !raw.empty() && raw[0] == '-';
  // Up to 19 digits: below 10^19, so the magnitude fits uint64 without overflow.
  if (IsIntegerText(raw) && raw.size() - (negative ? 1 : 0) <= 19) {
    uint64_t magnitude = 0;
    if (ReadInt(negative ? raw.substr(1) : raw, &magnitude)) {
      if (!negative) {
        *out = static_cast<double>(magnitude);  // nlohmann: number_unsigned
        return true;
      }
      if (magnitude <= uint64_t{1} << 63) {  // nlohmann: number_integer
        *out = static_cast<double>(static_cast<int64_t>(0 - magnitude));
        return true;
      }
    }
  }
  const auto [end, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), *out);
  return ec == std::errc() && end == raw.data() + raw.size();
}

bool ReadBool(std::string_view raw, bool* out) {
  if (raw == "true") {
    *out = true;
    return true;
  }
  if (raw == "false") {
    *out = false;
    return true;
  }
  return false;
}

// A string without escapes: the bytes between the quotes (Validate checked them as UTF-8).
bool StringText(std::string_view raw, std::string_view* out) {
  if (raw.size() < 2 || raw.front() != '"' || raw.back() != '"') return false;
  const std::string_view inner = raw.substr(1, raw.size() - 2);
  if (inner.find('\\') != std::string_view::npos) return false;
  *out = inner;
  return true;
}

bool ReadString(std::string_view raw, std::string* out) {
  std::string_view text;
  if (!StringText(raw, &text)) return false;
  out->assign(text.data(), text.size());
  return true;
}

// [x,y,z] with no spaces, as the encoder writes it.
bool ReadDim(std::string_view raw, Dim3* out) {
  if (raw.size() < 7 || raw.front() != '[' || raw.back() != ']') return false;
  std::array<uint32_t, 3> xyz{};
  const char* p = raw.data() + 1;
  const char* const end = raw.data() + raw.size() - 1;
  for (size_t i = 0; i < 3; ++i) {
    const char* stop = p;
    while (stop < end && *stop >= '0' && *stop <= '9') ++stop;
    if (stop == p) return false;
    uint64_t v = 0;
    const auto [parsed, ec] = std::from_chars(p, stop, v);
    if (ec != std::errc() || parsed != stop || v > std::numeric_limits<uint32_t>::max()) {
      return false;
    }
    xyz[i] = static_cast<uint32_t>(v);
    if (i < 2) {
      if (stop == end || *stop != ',') return false;
      p = stop + 1;
    } else if (stop != end) {
      return false;
    }
  }
  *out = {xyz[0], xyz[1], xyz[2]};
  return true;
}

bool ReadResource(std::string_view raw, Resource* out) {
  std::string_view text;
  if (!StringText(raw, &text)) return false;
  const std::optional<Resource> r = ResourceFromName(text);
  if (!r) return false;
  *out = *r;
  return true;
}

// ["registers","warps"] with no spaces; Validate rejected repeats and unknown names.
bool ReadResourceSet(std::string_view raw, ResourceMask* out) {
  if (raw.size() < 2 || raw.front() != '[' || raw.back() != ']') return false;
  std::string_view rest = raw.substr(1, raw.size() - 2);
  ResourceMask mask = 0;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    Resource r;
    if (!ReadResource(rest.substr(0, comma), &r)) return false;
    mask = static_cast<ResourceMask>(mask | MaskOf(r));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
    if (rest.empty()) return false;
  }
  *out = mask;
  return true;
}

bool ReadOccupancySource(std::string_view raw, OccupancySource* out) {
  std::string_view text;
  if (!StringText(raw, &text)) return false;
  const std::optional<OccupancySource> s = OccupancySourceFromName(text);
  if (!s) return false;
  *out = *s;
  return true;
}

// ---- The members of the two types read here, in the encoder's order (encoder.cc). The members of
// a line are matched against this list in order, so a line in the encoder's layout costs one name
// comparison per member, and a switch reads the value. ----

// Whether two member names are equal: sizes, then 8 bytes at a time (names are at most 24 bytes;
// inline, where a call to memcmp per member would cost as much as reading the value).
inline bool SameName(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n != b.size()) return false;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    uint64_t y;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) return false;
  }
  for (; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// One reader per kind of the tables (event_fields.h) the two types use; the others are never
// called (only kernel and kernel_time lines are read here).
template <class V>
bool ReadOptionalInt(std::string_view raw, V* out) {
  return ReadInt(raw, out);
}
template <class V>
bool ReadIntOrNull(std::string_view raw, V* out) {
  return ReadIntOrNull(raw, V{-1}, out);
}
bool ReadNumber(std::string_view raw, double* out) { return ReadDouble(raw, out); }
// cluster_occupancy: has_cluster is set from its presence (ReadMembers).
bool ReadOptionalNumber(std::string_view raw, double* out) { return ReadDouble(raw, out); }
bool ReadOptionalBool(std::string_view raw, bool* out) { return ReadBool(raw, out); }
bool ReadOptionalDim(std::string_view raw, std::optional<Dim3>* out) {
  return ReadDim(raw, &out->emplace());
}
bool ReadOneResource(std::string_view raw, Resource* out) { return ReadResource(raw, out); }
bool ReadOptionalOccupancySource(std::string_view raw, OccupancySource* out) {
  return ReadOccupancySource(raw, out);
}

// The member names of a table, the header's first (they are Validate's: LineInfo::header), in
// the encoder's order; ReadField's cases are their indices.
#define CUFLIGHT_LINE_NAME(kind, name, member, ...) #name,
#define CUFLIGHT_LINE_NO_RULE(name, trigger)
#define CUFLIGHT_LINE_NAMES(TABLE)                                                        \
  {"type", "version", CUFLIGHT_SCHEMA_HEADER(CUFLIGHT_LINE_NAME, CUFLIGHT_LINE_NO_RULE) \
       TABLE(CUFLIGHT_LINE_NAME, CUFLIGHT_LINE_NO_RULE)}
constexpr std::string_view kKernelNames[] = CUFLIGHT_LINE_NAMES(CUFLIGHT_SCHEMA_KERNEL);
constexpr std::string_view kKernelTimeNames[] = CUFLIGHT_LINE_NAMES(CUFLIGHT_SCHEMA_KERNEL_TIME);

template <size_t N>
consteval size_t IndexIn(const std::string_view (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return i;
  }
  throw "not a member of the table";
}

// Reads member number `field` (an index into the names) of a line of the table.
#define CUFLIGHT_LINE_CASE(kind, name, member, ...) \
  case IndexIn(kNames, #name):                      \
    return Read##kind(r, &e->member);
#define CUFLIGHT_LINE_READER(Struct, kNamesOf, TABLE)                     \
  inline bool ReadField(size_t field, std::string_view r, Struct* e) {     \
    constexpr auto& kNames = kNamesOf;                                    \
    switch (field) {                                                      \
      case 0: case 1: case 2: case 3: case 4: return true;                \
      TABLE(CUFLIGHT_LINE_CASE, CUFLIGHT_LINE_NO_RULE)                    \
      default: return false;                                              \
    }                                                                     \
  }
CUFLIGHT_LINE_READER(OwnedKernelEvent, kKernelNames, CUFLIGHT_SCHEMA_KERNEL)
CUFLIGHT_LINE_READER(OwnedKernelTimeEvent, kKernelTimeNames, CUFLIGHT_SCHEMA_KERNEL_TIME)

// Reads every member of `info` into *e (default-initialised but for its string buffers). Members
// of other names are ignored, as Decode ignores fields it does not know; a repeated name keeps
// its last value, as in Decode. False when a value is in a form the readers do not take.
// *seen: bit f set when member f was read.
template <class E, size_t N>
bool ReadMembers(const LineInfo& info, const std::string_view (&names)[N], E* e, uint64_t* seen) {
  static_assert(N <= 64);
  if (info.members_truncated) return false;
  size_t next = 0;
  for (int i = 0; i < info.member_count; ++i) {
    const Member& m = info.members[static_cast<size_t>(i)];
    if (m.key_escaped) return false;
    size_t f = next;
    if (f >= N || !SameName(names[f], m.key)) {
      f = 0;
      while (f < N && !SameName(names[f], m.key)) ++f;
      if (f == N) continue;  // a field this version does not know
    }
    if (!ReadField(f, m.raw, e)) return false;
    *seen |= uint64_t{1} << f;
    next = f + 1;
  }
  return true;
}

}  // namespace

OwnedKernelEvent& LineDecoder::KernelOf(OwnedEvent* event) {
  if (auto* held = std::get_if<OwnedKernelEvent>(event)) return *held;
  OwnedKernelEvent& e = event->emplace<OwnedKernelEvent>();
  if (!spare_.empty()) {
    e.api.swap(spare_.back().api);
    e.name.swap(spare_.back().name);
    e.demangled.swap(spare_.back().demangled);
    spare_.pop_back();
  }
  return e;
}

void LineDecoder::PutAside(OwnedEvent* event) {
  auto* kernel = std::get_if<OwnedKernelEvent>(event);
  if (kernel == nullptr || spare_.size() >= kMaxSpare) return;
  spare_.emplace_back();
  spare_.back().api.swap(kernel->api);
  spare_.back().name.swap(kernel->name);
  spare_.back().demangled.swap(kernel->demangled);
}

// The kernel alternative of *event, reset to its defaults. Its string buffers are kept: those of
// the kernel event *event held, or a set put aside when another type replaced a kernel event in
// a result (so results reused for lines of all types in any order stop allocating).
OwnedKernelEvent& LineDecoder::ResetKernel(OwnedEvent* event) {
  OwnedKernelEvent& held = KernelOf(event);
  std::string api = std::move(held.api);
  std::string name = std::move(held.name);
  std::string demangled = std::move(held.demangled);
  held = OwnedKernelEvent{};
  held.api = std::move(api);
  held.name = std::move(name);
  held.demangled = std::move(demangled);
  return held;
}

OwnedKernelTimeEvent& LineDecoder::ResetKernelTime(OwnedEvent* event) {
  if (auto* held = std::get_if<OwnedKernelTimeEvent>(event)) {
    *held = OwnedKernelTimeEvent{};
    return *held;
  }
  PutAside(event);
  return event->emplace<OwnedKernelTimeEvent>();
}

Reason LineDecoder::ReadFast(DecodeResult* result) {
  last_type_ = EventTypeName(info_.type);
  result->reason = Reason::kOk;
  result->message.clear();
  result->header = info_.header;
  ++fast_lines_;
  return Reason::kOk;
}

Reason LineDecoder::Decode(std::string_view line, DecodeResult* result) noexcept {
  last_type_ = {};
  // A kernel or kernel_time line in the encoder's layout: the validator's fast path checks it and
  // writes its members into the event, in one pass.
  if (line.size() >= 40 && line[9] == 'k') {
    try {
      bool read;
      if (line[15] == '"') {
        OwnedKernelEvent& e = ResetKernel(&result->event);
        read = internal::DecodeFastPath(line, &info_, &e);
        if (read && e.cluster) {  // cluster_occupancy may come with a cluster
          for (int i = 0; i < info_.member_count; ++i) {
            if (info_.members[static_cast<size_t>(i)].key == "cluster_occupancy") {
              e.occupancy.has_cluster = true;
            }
          }
        }
      } else {
        read = internal::DecodeFastPath(line, &info_, &ResetKernelTime(&result->event));
      }
      if (read) return ReadFast(result);
    } catch (...) {  // std::bad_alloc from a string: Decode says what it says
    }
  }
  const Reason verdict = Validate(line, &info_, nullptr);
  if (info_.type_known) {
    last_type_ = EventTypeName(info_.type);
  } else if (!info_.members_truncated) {
    for (int i = 0; i < info_.member_count; ++i) {  // the last `type` counts, as in Decode
      const Member& m = info_.members[static_cast<size_t>(i)];
      std::string_view text;
      if (!m.key_escaped && m.key == "type") last_type_ = StringText(m.raw, &text) ? text : "";
    }
  }
  if (verdict == Reason::kOk && info_.type_known &&
      (info_.type == EventType::kKernel || info_.type == EventType::kKernelTime)) {
    try {
      // Decode's requirements that graph_id and graph_node_id come together and that a cluster
      // launch has cluster_occupancy are Validate's too; the reading relies on them.
      bool read;
      if (info_.type == EventType::kKernel) {
        OwnedKernelEvent& e = ResetKernel(&result->event);
        e.header = info_.header;
        uint64_t seen = 0;
        read = ReadMembers(info_, kKernelNames, &e, &seen);
        e.occupancy.has_cluster = (seen >> IndexIn(kKernelNames, "cluster_occupancy")) & 1;
      } else {
        OwnedKernelTimeEvent& e = ResetKernelTime(&result->event);
        e.header = info_.header;
        uint64_t seen = 0;
        read = ReadMembers(info_, kKernelTimeNames, &e, &seen);
      }
      if (read) return ReadFast(result);
    } catch (...) {  // std::bad_alloc from a string: Decode says what it says
    }
  }
  ++reference_lines_;
  // A kernel event replaced by another type leaves its strings for the next kernel line (not
  // when this line is a kernel too: Decode's event brings its own).
  if (!(info_.type_known && info_.type == EventType::kKernel)) {
    try {
      PutAside(&result->event);
    } catch (...) {  // std::bad_alloc: not kept
    }
  }
  *result = schema::Decode(line);
  return result->reason;
}

}  // namespace cuflight::schema
