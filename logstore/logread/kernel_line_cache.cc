#include "kernel_line_cache.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <charconv>
#include <new>
#include <system_error>
#include <variant>

namespace cuflight::logread::internal {
namespace {

// Consumes `literal` at *pos.
bool Expect(std::string_view line, size_t* pos, std::string_view literal) {
  if (line.substr(*pos, literal.size()) != literal) return false;
  *pos += literal.size();
  return true;
}

// Consumes a plain JSON integer (0, or a digit 1-9 and digits) at *pos into *out; false when
// there is none or it does not fit T.
template <class T>
bool ReadInteger(std::string_view line, size_t* pos, T* out) {
  if (*pos >= line.size()) return false;
  const char first = line[*pos];
  if (first == '0') {
    *out = 0;
    ++*pos;
    return true;
  }
  if (first < '1' || first > '9') return false;
  const char* end = line.data() + line.size();
  const auto [ptr, ec] = std::from_chars(line.data() + *pos, end, *out);
  if (ec != std::errc()) return false;
  *pos = static_cast<size_t>(ptr - line.data());
  return true;
}

// The head's member names, as a tail must not hold them (3.).
constexpr std::string_view kHeadNames[] = {"\"type\"",   "\"version\"", "\"ts_ns\"",
                                           "\"pid\"",    "\"seq\"",     "\"tid\"",
                                           "\"device\"", "\"context\"", "\"stream\"",
                                           "\"correlation_id\""};

}  // namespace

bool KernelLineCache::ReadHead(std::string_view line, Head* h, size_t* tail_begin) noexcept {
  size_t pos = 0;
  const bool ok = Expect(line, &pos, R"({"type":"kernel","version":1,"ts_ns":)") &&
                  ReadInteger(line, &pos, &h->header.ts_ns) && Expect(line, &pos, R"(,"pid":)") &&
                  ReadInteger(line, &pos, &h->header.pid) && Expect(line, &pos, R"(,"seq":)") &&
                  ReadInteger(line, &pos, &h->header.seq) && Expect(line, &pos, R"(,"tid":)") &&
                  ReadInteger(line, &pos, &h->tid) && Expect(line, &pos, R"(,"device":)") &&
                  ReadInteger(line, &pos, &h->device) && Expect(line, &pos, R"(,"context":)") &&
                  ReadInteger(line, &pos, &h->context) && Expect(line, &pos, R"(,"stream":)") &&
                  ReadInteger(line, &pos, &h->stream) &&
                  Expect(line, &pos, R"(,"correlation_id":)") &&
                  ReadInteger(line, &pos, &h->correlation_id) && Expect(line, &pos, ",");
  *tail_begin = pos;
  return ok;
}

bool KernelLineCache::Cacheable(std::string_view tail) noexcept {
  if (tail.find('\\') != std::string_view::npos) return false;
  for (const std::string_view name : kHeadNames) {
    if (tail.find(name) != std::string_view::npos) return false;
  }
  return true;
}

bool KernelLineCache::SameHead(const Head& h, const schema::OwnedKernelEvent& e) noexcept {
  return e.header == h.header && e.tid == h.tid && e.device == h.device &&
         e.context == h.context && e.stream == h.stream && e.correlation_id == h.correlation_id;
}

schema::Reason KernelLineCache::DecodeFully(std::string_view line,
                                            schema::DecodeResult* result) noexcept {
  if (auto* k = std::get_if<schema::OwnedKernelEvent>(&result->event);
      k != nullptr && spare_.size() < kMaxSpare && !line.starts_with(R"({"type":"kernel",)")) {
    try {
      spare_.push_back(std::move(*k));
    } catch (const std::bad_alloc&) {
      // not kept: the next kernel event allocates its strings again
    }
  }
  ++misses_;
  const schema::Reason reason = decoder_.Decode(line, result);
  last_type_ = decoder_.last_type();
  return reason;
}

schema::Reason KernelLineCache::Decode(std::string_view line,
                                       schema::DecodeResult* result) noexcept {
  ++lines_;
  Head head;
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
      if (!std::holds_alternative<schema::OwnedKernelEvent>(result->event)) {
        if (spare_.empty()) {
          result->event.emplace<schema::OwnedKernelEvent>();
        } else {
          result->event = std::move(spare_.back());
          spare_.pop_back();
        }
      }
      std::get<schema::OwnedKernelEvent>(result->event) = e.event;  // reuses the strings' storage
    } catch (const std::bad_alloc&) {
      break;  // LineDecoder says what it says out of memory
    }
    auto& k = std::get<schema::OwnedKernelEvent>(result->event);
    k.header = head.header;
    k.tid = head.tid;
    k.device = head.device;
    k.context = head.context;
    k.stream = head.stream;
    k.correlation_id = head.correlation_id;
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
