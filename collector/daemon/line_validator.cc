#include "line_validator.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <exception>
#include <variant>

namespace cuflight::collector {
namespace {

// Reads a few top-level members of a validated line in one pass over LineInfo's member array
// (instead of one LineInfo::Find scan per member). Names are matched by length first, through a
// table, so most members cost one lookup.
template <size_t N>
class MemberSet {
 public:
  explicit constexpr MemberSet(const std::array<std::string_view, N>& keys) : keys_(keys) {
    for (size_t k = 0; k < N; ++k) {
      if (keys[k].size() < kMaxLength) by_length_[keys[k].size()] |= 1u << k;
    }
  }

  // raws[k]: the raw JSON text of member keys[k] (the last one when repeated), empty if absent.
  void Collect(const schema::LineInfo& info, std::array<std::string_view, N>* raws) const {
    raws->fill(std::string_view());
    if (info.members_truncated) return CollectSlowly(info, raws);
    for (int i = 0; i < info.member_count; ++i) {
      const schema::Member& m = info.members[static_cast<size_t>(i)];
      if (m.key_escaped) return CollectSlowly(info, raws);
      if (m.key.size() >= kMaxLength) continue;
      for (uint32_t mask = by_length_[m.key.size()]; mask != 0; mask &= mask - 1) {
        const auto k = static_cast<size_t>(__builtin_ctz(mask));
        if (m.key == keys_[k]) (*raws)[k] = m.raw;
      }
    }
  }

 private:
  static constexpr size_t kMaxLength = 32;

  void CollectSlowly(const schema::LineInfo& info, std::array<std::string_view, N>* raws) const {
    for (size_t k = 0; k < N; ++k) (*raws)[k] = info.Find(keys_[k]).value_or(std::string_view());
  }

  std::array<std::string_view, N> keys_;
  std::array<uint32_t, kMaxLength> by_length_{};
};

// An unsigned integer member: plain digits directly, any other integral spelling the validator
// accepts (2.0, 1e3) through LineInfo; 0 when absent.
uint64_t UintOf(const schema::LineInfo& info, std::string_view key, std::string_view raw) {
  uint64_t value = 0;
  if (raw.empty()) return 0;
  const auto [end, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), value);
  if (ec == std::errc() && end == raw.data() + raw.size()) return value;
  value = 0;
  info.GetUint(key, &value);
  return value;
}

int32_t Int32Of(const schema::LineInfo& info, std::string_view key, std::string_view raw) {
  int32_t value = 0;
  if (raw.empty()) return 0;
  const auto [end, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), value);
  if (ec == std::errc() && end == raw.data() + raw.size()) return value;
  int64_t wide = 0;
  return info.GetInt(key, &wide) ? static_cast<int32_t>(wide) : 0;
}

// A string member: the text between the quotes when it has no escape, else unescaped into
// `scratch` (empty when it does not fit).
std::string_view StringOf(const schema::LineInfo& info, std::string_view key, std::string_view raw,
                          char* scratch, size_t cap) {
  if (raw.size() < 2 || raw.front() != '"') return {};
  const std::string_view inner = raw.substr(1, raw.size() - 2);
  if (inner.find('\\') == std::string_view::npos) return inner;
  std::string_view value;
  return info.GetString(key, scratch, cap, &value) ? value : std::string_view();
}

double DoubleOf(std::string_view raw) {
  double value = 0;
  if (raw.empty()) return 0;
  std::from_chars(raw.data(), raw.data() + raw.size(), value);
  return value;
}

constexpr std::array<std::string_view, 7> kKernelKeys = {
    "correlation_id",    "device",    "demangled",    "name",
    "limiting_resource", "occupancy", "graph_node_id"};
constexpr std::array<std::string_view, 4> kKernelTimeKeys = {"correlation_id", "device",
                                                             "duration_ns", "graph_node_id"};
constexpr std::array<std::string_view, 7> kCounterKeys = {
    "emitted",           "dropped",
    "dropped_ring_full", "dropped_disconnected",
    "timing_dropped",    "dropped_backpressure",
    "occupancy_disagreements"};
const MemberSet<7> kKernelMembers(kKernelKeys);
const MemberSet<4> kKernelTimeMembers(kKernelTimeKeys);
const MemberSet<7> kCounterMembers(kCounterKeys);
constexpr std::array<std::string_view, 1> kApiErrorKeys = {"error_name"};
const MemberSet<1> kApiErrorMembers(kApiErrorKeys);

// process_start is rare (one per connection): its strings are decoded in full, so a long or
// escaped exe path is never cut.
void ReadProcessStart(std::string_view line, LineFacts* facts) {
  schema::DecodeResult decoded = schema::Decode(line);
  if (const auto* start = std::get_if<schema::OwnedProcessStartEvent>(&decoded.event)) {
    facts->hostname_storage = std::move(start->hostname);
    facts->exe_storage = std::move(start->exe);
    facts->start_ns = start->start_ns;
    facts->instance_id = start->instance_id;
    facts->pid_ns = start->pid_ns;
  } else {
    facts->hostname_storage.clear();
    facts->exe_storage.clear();
    facts->start_ns = 0;
    facts->instance_id = 0;
    facts->pid_ns = 0;
  }
  facts->hostname = facts->hostname_storage;
  facts->exe = facts->exe_storage;
}

// A stall event is rare (at most one a second per process): decoded in full.
void ReadStall(std::string_view line, LineFacts* facts) {
  facts->stall_ages.clear();
  schema::DecodeResult decoded = schema::Decode(line);
  const auto* stall = std::get_if<schema::OwnedStallEvent>(&decoded.event);
  if (stall == nullptr || stall->state != schema::StallState::kStalled) return;
  for (const schema::OwnedStallStream& s : stall->streams) {
    const int64_t ms = s.launches.empty() ? s.waiting_ms : s.launches.front().age_ms;
    const double seconds = static_cast<double>(ms) / 1000.0;
    auto it = std::find_if(facts->stall_ages.begin(), facts->stall_ages.end(),
                           [&s](const Metrics::StallAge& a) { return a.device == s.device; });
    if (it == facts->stall_ages.end()) {
      facts->stall_ages.push_back({s.device, seconds});
    } else {
      it->seconds = std::max(it->seconds, seconds);
    }
  }
}

}  // namespace

schema::Reason ValidateLine(std::string_view line, LineFacts* facts, bool metrics_fields) noexcept {
  schema::LineInfo& info = facts->info;
  const schema::Reason reason = schema::Validate(line, &info, &facts->error);
  if (info.header_valid) {
    facts->header = info.header;
  } else {
    facts->header.reset();
  }
  if (reason != schema::Reason::kOk) {
    try {
      facts->message.assign(facts->error.message());
    } catch (const std::exception&) {
      facts->message.clear();
    }
    return reason;
  }
  facts->type = info.type;
  if (info.type == schema::EventType::kProcessStart) {
    try {
      ReadProcessStart(line, facts);
    } catch (const std::exception&) {
      return schema::Reason::kInternalError;
    }
    return schema::Reason::kOk;
  }
  if (!metrics_fields) return schema::Reason::kOk;
  switch (info.type) {
    case schema::EventType::kKernel: {
      std::array<std::string_view, 7> raw;
      kKernelMembers.Collect(info, &raw);
      facts->correlation_id = UintOf(info, kKernelKeys[0], raw[0]);
      facts->device = Int32Of(info, kKernelKeys[1], raw[1]);
      char* scratch = facts->name_scratch.data();
      const size_t cap = facts->name_scratch.size();
      std::string_view name = StringOf(info, kKernelKeys[2], raw[2], scratch, cap);
      if (name.empty()) name = StringOf(info, kKernelKeys[3], raw[3], scratch, cap);
      facts->kernel_name = name;
      facts->limiting_resource =
          StringOf(info, kKernelKeys[4], raw[4], facts->resource_scratch.data(),
                   facts->resource_scratch.size());
      facts->occupancy = DoubleOf(raw[5]);
      facts->graph_node_id = UintOf(info, kKernelKeys[6], raw[6]);
      break;
    }
    case schema::EventType::kKernelTime: {
      std::array<std::string_view, 4> raw;
      kKernelTimeMembers.Collect(info, &raw);
      facts->correlation_id = UintOf(info, kKernelTimeKeys[0], raw[0]);
      facts->device = Int32Of(info, kKernelTimeKeys[1], raw[1]);
      facts->duration_ns = UintOf(info, kKernelTimeKeys[2], raw[2]);
      facts->graph_node_id = UintOf(info, kKernelTimeKeys[3], raw[3]);
      break;
    }
    case schema::EventType::kApiError: {
      std::array<std::string_view, 1> raw;
      kApiErrorMembers.Collect(info, &raw);
      facts->error_name = StringOf(info, kApiErrorKeys[0], raw[0], facts->error_name_scratch.data(),
                                   facts->error_name_scratch.size());
      break;
    }
    case schema::EventType::kStats:
    case schema::EventType::kProcessEnd: {
      std::array<std::string_view, 7> raw;
      kCounterMembers.Collect(info, &raw);
      facts->emitted = UintOf(info, kCounterKeys[0], raw[0]);
      facts->dropped = UintOf(info, kCounterKeys[1], raw[1]);
      facts->dropped_ring_full = UintOf(info, kCounterKeys[2], raw[2]);
      facts->dropped_disconnected = UintOf(info, kCounterKeys[3], raw[3]);
      facts->timing_dropped = UintOf(info, kCounterKeys[4], raw[4]);
      facts->dropped_backpressure = UintOf(info, kCounterKeys[5], raw[5]);
      facts->occupancy_disagreements = UintOf(info, kCounterKeys[6], raw[6]);
      break;
    }
    case schema::EventType::kStall:
      try {
        ReadStall(line, facts);
      } catch (const std::exception&) {
        return schema::Reason::kInternalError;
      }
      break;
    default:
      break;
  }
  return schema::Reason::kOk;
}

}  // namespace cuflight::collector
