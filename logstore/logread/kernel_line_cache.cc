#include "kernel_line_cache.h"

#include "cuflight/schema/event_fields.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <charconv>
#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <variant>

namespace cuflight::logread::internal {
namespace {

// Consumes the string literal `literal` at *pos. Its length is a constant, so the comparison is
// a few inline loads rather than a call (a head holds a dozen of them).
template <size_t N>
bool Expect(std::string_view line, size_t* pos, const char (&literal)[N]) {
  constexpr size_t n = N - 1;
  if (line.size() - *pos < n || std::memcmp(line.data() + *pos, literal, n) != 0) return false;
  *pos += n;
  return true;
}

// The head's members are the table's (event_fields.h): the header's, then the kernel event's up
// to its first member that is not an integer (tid, device, context, stream, correlation_id).
// VisitHead calls v(name, member of a, member of b, range) for each, in the table's order.
template <class V, class T, size_t N>
bool HeadMemberInt(V& v, const char (&name)[N], T& a, const T& b, schema::IntRange range) {
  v(name, a, b, range);
  return true;
}
// Every other kind ends the head.
#define CUFLIGHT_HEAD_ENDS(kind)                                    \
  template <class V, class... Args>                                 \
  bool HeadMember##kind(V&, const char*, Args&&...) { return false; }
CUFLIGHT_HEAD_ENDS(String)
CUFLIGHT_HEAD_ENDS(Dim)
CUFLIGHT_HEAD_ENDS(OptionalDim)
CUFLIGHT_HEAD_ENDS(OptionalBool)
CUFLIGHT_HEAD_ENDS(OptionalInt)
CUFLIGHT_HEAD_ENDS(Number)
CUFLIGHT_HEAD_ENDS(OptionalNumber)
CUFLIGHT_HEAD_ENDS(OneResource)
CUFLIGHT_HEAD_ENDS(ResourceSet)
CUFLIGHT_HEAD_ENDS(IntOrNull)
CUFLIGHT_HEAD_ENDS(OptionalOccupancySource)
#undef CUFLIGHT_HEAD_ENDS

template <class V>
void VisitHead(schema::OwnedKernelEvent& a, const schema::OwnedKernelEvent& b, V& v) {
  using namespace schema;  // the tables name their ranges (kCount32, ...) unqualified
  bool open = true;
#define CUFLIGHT_HEAD_FIELD(kind, name, member, ...) \
  if (open) open = HeadMember##kind(v, #name, a_base.member, b_base.member __VA_OPT__(, ) __VA_ARGS__);
#define CUFLIGHT_HEAD_RULE(name, trigger)
  {
    auto& a_base = a.header;
    const auto& b_base = b.header;
    CUFLIGHT_SCHEMA_HEADER(CUFLIGHT_HEAD_FIELD, CUFLIGHT_HEAD_RULE)
  }
  {
    auto& a_base = a;
    const auto& b_base = b;
    CUFLIGHT_SCHEMA_KERNEL(CUFLIGHT_HEAD_FIELD, CUFLIGHT_HEAD_RULE)
  }
#undef CUFLIGHT_HEAD_FIELD
#undef CUFLIGHT_HEAD_RULE
}

// Reads each head member as `,"name":` and a plain JSON integer (0, or a digit 1-9 and digits)
// within the member's range.
struct HeadReader {
  std::string_view line;
  size_t pos = 0;
  bool ok = true;

  template <class T, size_t N>
  void operator()(const char (&name)[N], T& out, const T&, schema::IntRange range) {
    ok = ok && Expect(line, &pos, ",\"") && Expect(line, &pos, name) && Expect(line, &pos, "\":");
    if (!ok || pos >= line.size() || line[pos] < '0' || line[pos] > '9' ||
        (line[pos] == '0' && pos + 1 < line.size() && line[pos + 1] >= '0' &&
         line[pos + 1] <= '9')) {
      ok = false;
      return;
    }
    // Up to 19 digits cannot overflow; a longer run goes to from_chars, which says whether it
    // does (2^64 - 1 has 20).
    size_t end = pos;
    uint64_t v = 0;
    while (end < line.size() && end - pos < 19 && line[end] >= '0' && line[end] <= '9') {
      v = v * 10 + static_cast<uint64_t>(line[end] - '0');
      ++end;
    }
    if (end < line.size() && line[end] >= '0' && line[end] <= '9') {
      const auto [ptr, ec] = std::from_chars(line.data() + pos, line.data() + line.size(), v);
      if (ec != std::errc()) {
        ok = false;
        return;
      }
      end = static_cast<size_t>(ptr - line.data());
    }
    if ((range.lo > 0 && v < static_cast<uint64_t>(range.lo)) || v > range.hi) {
      ok = false;
      return;
    }
    pos = end;
    out = static_cast<T>(v);
  }
};

// The head's member names, quoted, as a tail must not hold them (3.): "type", "version" and the
// visited ones.
const std::vector<std::string>& HeadNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"\"type\"", "\"version\""};
    schema::OwnedKernelEvent e;
    auto add = [&n](const char* name, auto&, const auto&, schema::IntRange) {
      n.push_back("\"" + std::string(name) + "\"");
    };
    VisitHead(e, e, add);
    return n;
  }();
  return names;
}

}  // namespace

bool KernelLineCache::ReadHead(std::string_view line, schema::OwnedKernelEvent* head,
                               size_t* tail_begin) noexcept {
  HeadReader r{line};
  r.ok = Expect(line, &r.pos, R"({"type":"kernel","version":1)");
  VisitHead(*head, *head, r);
  r.ok = r.ok && Expect(line, &r.pos, ",");
  *tail_begin = r.pos;
  return r.ok;
}

bool KernelLineCache::Cacheable(std::string_view tail) noexcept {
  if (tail.find('\\') != std::string_view::npos) return false;
  for (const std::string& name : HeadNames()) {
    if (tail.find(name) != std::string_view::npos) return false;
  }
  return true;
}

bool KernelLineCache::SameHead(const schema::OwnedKernelEvent& head,
                               const schema::OwnedKernelEvent& e) noexcept {
  bool same = true;
  auto compare = [&same](const char*, const auto& x, const auto& y, schema::IntRange) {
    same = same && x == y;
  };
  VisitHead(const_cast<schema::OwnedKernelEvent&>(e), head, compare);
  return same;
}

schema::Reason KernelLineCache::DecodeFully(std::string_view line,
                                            schema::DecodeResult* result) noexcept {
  ++misses_;
  const schema::Reason reason = decoder_.Decode(line, result);
  last_type_ = decoder_.last_type();
  return reason;
}

schema::Reason KernelLineCache::Decode(std::string_view line,
                                       schema::DecodeResult* result) noexcept {
  ++lines_;
  schema::OwnedKernelEvent& head = head_;
  size_t tail_begin = 0;
  if (no_cache_ || !ReadHead(line, &head, &tail_begin)) return DecodeFully(line, result);
  if (entries_.empty()) {
    try {
      entries_.resize(kSets * kWays);
    } catch (const std::bad_alloc&) {
      no_cache_ = true;  // read on without the cache: the same results, slower
      return DecodeFully(line, result);
    }
  }
  const std::string_view tail = line.substr(tail_begin);
  const uint64_t hash = XXH3_64bits(tail.data(), tail.size());
  Entry* set = &entries_[(hash % kSets) * kWays];
  for (size_t w = 0; w < kWays; ++w) {
    Entry& e = set[w];
    if (e.used == 0 || e.hash != hash || e.tail != tail) continue;
    try {
      decoder_.KernelOf(&result->event) = e.event;  // reuses the strings' storage
    } catch (const std::bad_alloc&) {
      break;  // LineDecoder says what it says out of memory
    }
    auto& k = std::get<schema::OwnedKernelEvent>(result->event);
    auto copy = [](const char*, auto& to, const auto& from, schema::IntRange) { to = from; };
    VisitHead(k, head, copy);
    result->reason = schema::Reason::kOk;
    result->message.clear();
    result->header = head.header;
    e.used = lines_;
    last_type_ = schema::EventTypeName(schema::EventType::kKernel);
    ++hits_;
    return schema::Reason::kOk;
  }

  const schema::Reason reason = DecodeFully(line, result);
  const auto* k = std::get_if<schema::OwnedKernelEvent>(&result->event);
  if (reason != schema::Reason::kOk || k == nullptr || !SameHead(head, *k) || !Cacheable(tail)) {
    return reason;
  }
  Entry* victim = &set[0];
  for (size_t w = 1; w < kWays; ++w) {
    if (set[w].used < victim->used) victim = &set[w];
  }
  try {
    victim->used = 0;
    victim->tail.assign(tail);
    victim->event = *k;
    victim->hash = hash;
    victim->used = lines_;
  } catch (const std::bad_alloc&) {
    victim->used = 0;  // not kept; the line is decoded all the same
  }
  return reason;
}

}  // namespace cuflight::logread::internal
