#include "cuflight/schema/launch_encoder.h"

#include <cstring>
#include <string_view>

#include "cuflight/schema/encoder.h"
#include "cuflight/schema/event_fields.h"
#include "digits.h"

namespace cuflight::schema {
namespace {

static_assert(kSchemaVersion == 1, "the literal below spells the version");

// The launch table's members, in the order Encode writes them (launch_encoder.h, point 6): a
// member added, removed or moved in CUFLIGHT_SCHEMA_LAUNCH must be dealt with in Encode below
// (written, or a reason for the slow path) before this builds again.
#define CUFLIGHT_LAUNCH_NAME(kind, name, ...) #name ","
#define CUFLIGHT_LAUNCH_RULE(name, trigger)
static_assert(std::string_view(
                  CUFLIGHT_SCHEMA_LAUNCH(CUFLIGHT_LAUNCH_NAME, CUFLIGHT_LAUNCH_RULE)) ==
                  "tid,correlation_id,config,grid,graph_id,graph_node_id,waves,tail_utilization,"
                  "recovered,timing_window,",
              "the launch table changed: update LaunchEncoder::Encode");
#undef CUFLIGHT_LAUNCH_NAME
#undef CUFLIGHT_LAUNCH_RULE

constexpr int64_t k1e8 = 100'000'000;

// A constant's bytes, its terminating NUL left out; returns the end.
template <size_t N>
[[gnu::always_inline]] inline char* Put(char* p, const char (&text)[N]) {
  std::memcpy(p, text, N - 1);
  return p + N - 1;
}

// Most of a launch's numbers have fewer than 9 digits.
[[gnu::always_inline]] inline char* PutUnsigned(char* p, uint64_t v) {
  if (v < static_cast<uint64_t>(k1e8)) return internal::WriteBelow1e8(p, static_cast<uint32_t>(v));
  return internal::WriteDecimal(p, v);
}

}  // namespace

LaunchEncoder::LaunchEncoder(int32_t pid) noexcept : pid_(pid) {
  char* p = Put(pid_members_, R"(,"pid":)");
  char digits[internal::kMaxIntChars];
  const char* end = internal::WriteSigned(digits, pid);  // at most 11 bytes
  std::memcpy(p, digits, static_cast<size_t>(end - digits));
  p += end - digits;
  p = Put(p, R"(,"seq":)");
  pid_members_len_ = static_cast<uint8_t>(p - pid_members_);
}

size_t LaunchEncoder::Encode(const LaunchEvent& e, char* buf, size_t cap) noexcept {
  // Point 5: anything else is Encode's.
  if (cap < kMaxLine || e.header.pid != pid_ || e.graph_id || e.graph_node_id || e.waves ||
      e.tail_utilization || e.recovered) {
    return schema::Encode(e, buf, cap);
  }
  // Room for the longest line was checked above: 38 + 20 (ts_ns) + 25 (pid members) + 20 (seq)
  // + 36 (tid members) + 20 (correlation_id) + 72 (configuration and grid) + 22 (timing_window)
  // + 2 = 255 bytes. The kept members are copied whole (16, 32, 48 and 96 bytes, the last
  // ending by byte 255): nothing is stored past kMaxLine.
  char* p = Put(buf, R"({"type":"launch","version":1,"ts_ns":)");
  const int64_t ts = e.header.ts_ns;
  if (ts >= k1e8) {
    // Point 3: the digits above the last 8 are those of the last line, most of the time.
    const int64_t high = ts / k1e8;
    if (high != ts_high_) {
      char digits[internal::kMaxIntChars];
      const char* end = internal::WriteDecimal(digits, static_cast<uint64_t>(high));  // <= 11
      std::memcpy(ts_high_digits_, digits, sizeof(ts_high_digits_));
      ts_high_len_ = static_cast<uint8_t>(end - digits);
      ts_high_ = high;
    }
    std::memcpy(p, ts_high_digits_, sizeof(ts_high_digits_));
    p += ts_high_len_;
    internal::Write8(p, static_cast<uint32_t>(ts - high * k1e8));
    p += 8;
  } else {
    p = internal::WriteSigned(p, ts);
  }
  std::memcpy(p, pid_members_, sizeof(pid_members_));
  p += pid_members_len_;
  p = PutUnsigned(p, e.header.seq);
  if (e.tid != tid_ || tid_len_ == 0) {
    // At most 7 + 11 + 18 bytes: within tid_members_.
    char* q = Put(tid_members_, R"(,"tid":)");
    q = internal::WriteSigned(q, e.tid);
    q = Put(q, R"(,"correlation_id":)");
    tid_len_ = static_cast<uint8_t>(q - tid_members_);
    tid_ = e.tid;
  }
  std::memcpy(p, tid_members_, sizeof(tid_members_));
  p += tid_len_;
  p = PutUnsigned(p, e.correlation_id);
  if (e.config != config_ || !(e.grid == grid_) || shape_len_ == 0) {
    // At most 10 + 20 + 9 + 10 + 1 + 10 + 1 + 10 + 1 = 72 bytes: within shape_members_.
    char* q = Put(shape_members_, R"(,"config":)");
    q = PutUnsigned(q, e.config);
    q = Put(q, R"(,"grid":[)");
    q = PutUnsigned(q, e.grid.x);
    *q++ = ',';
    q = PutUnsigned(q, e.grid.y);
    *q++ = ',';
    q = PutUnsigned(q, e.grid.z);
    *q++ = ']';
    shape_len_ = static_cast<uint8_t>(q - shape_members_);
    config_ = e.config;
    grid_ = e.grid;
  }
  std::memcpy(p, shape_members_, sizeof(shape_members_));
  p += shape_len_;
  if (e.timing_window) {
    p = *e.timing_window ? Put(p, R"(,"timing_window":true)") : Put(p, R"(,"timing_window":false)");
  }
  p = Put(p, "}\n");
  return static_cast<size_t>(p - buf);
}

}  // namespace cuflight::schema
