// LaunchEncoder against Encode, the one definition of the line (launch_encoder.h, point 6).
#include "cuflight/schema/launch_encoder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"

namespace cuflight::schema {
namespace {

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

std::string Reference(const LaunchEvent& e) {
  std::string line(1024, '\0');
  line.resize(Encode(e, line.data(), line.size()));
  return line;
}

std::string Fast(LaunchEncoder& encoder, const LaunchEvent& e) {
  std::string line(1024, '\0');
  line.resize(encoder.Encode(e, line.data(), line.size()));
  return line;
}

// The line written out by hand from docs/protocol.md's `launch` and encoder.h's rules (members in
// the table's order, optional ones only when set), not from either encoder.
TEST(LaunchEncoderTest, LineIsExact) {
  LaunchEncoder encoder(4242);
  LaunchEvent e;
  e.header = {1732000000123456789, 4242, 17};
  e.tid = 99;
  e.correlation_id = 5;
  e.config = 3;
  e.grid = {128, 2, 1};
  EXPECT_EQ(Fast(encoder, e),
            R"({"type":"launch","version":1,"ts_ns":1732000000123456789,"pid":4242,"seq":17,)"
            R"("tid":99,"correlation_id":5,"config":3,"grid":[128,2,1]})"
            "\n");
  e.header.ts_ns = 1732000000100000000;  // the same digits above the last 8, zeros below
  e.timing_window = false;
  EXPECT_EQ(Fast(encoder, e),
            R"({"type":"launch","version":1,"ts_ns":1732000000100000000,"pid":4242,"seq":17,)"
            R"("tid":99,"correlation_id":5,"config":3,"grid":[128,2,1],"timing_window":false})"
            "\n");
  e.header.ts_ns = 1732000001099999999;  // other digits above
  e.timing_window = true;
  e.correlation_id = kMaxU64;
  EXPECT_EQ(Fast(encoder, e),
            R"({"type":"launch","version":1,"ts_ns":1732000001099999999,"pid":4242,"seq":17,)"
            R"("tid":99,"correlation_id":18446744073709551615,"config":3,"grid":[128,2,1],)"
            R"("timing_window":true})"
            "\n");
}

// Values that stress the digits: 0, powers of ten and their neighbours, the type's extremes.
template <class T>
std::vector<T> EdgeValues() {
  std::vector<T> v = {0, 1, 9, std::numeric_limits<T>::max(), std::numeric_limits<T>::min()};
  for (T p = 10;; p *= 10) {
    v.push_back(static_cast<T>(p - 1));
    v.push_back(p);
    v.push_back(static_cast<T>(p + 1));
    if constexpr (std::is_signed_v<T>) {
      v.push_back(static_cast<T>(-p));
      v.push_back(static_cast<T>(1 - p));
    }
    if (p > std::numeric_limits<T>::max() / 10) break;
  }
  return v;
}

// Many launches through one encoder (its cached time digits carry from line to line): every
// member random, at an edge or ordinary, every optional member set or not, the pid its own or
// another; each line equal to Encode's.
TEST(LaunchEncoderTest, EveryLineIsTheLineOfEncode) {
  const auto u64s = EdgeValues<uint64_t>();
  const auto u32s = EdgeValues<uint32_t>();
  const auto i32s = EdgeValues<int32_t>();
  const auto i64s = EdgeValues<int64_t>();
  std::mt19937_64 rng(20261129);
  const auto pick = [&rng](const auto& edges, auto ordinary) {
    using T = typename std::decay_t<decltype(edges)>::value_type;
    switch (rng() % 3) {
      case 0:
        return edges[rng() % edges.size()];
      case 1:
        return static_cast<T>(rng() >> (rng() % 64));
      default:
        return static_cast<T>(ordinary);
    }
  };
  for (const int32_t pid : {0, 1, 4242, std::numeric_limits<int32_t>::max(), -7}) {
    LaunchEncoder encoder(pid);
    int64_t ts = 1764374400000000000;  // 2025-11-29, about the clock's value
    LaunchEvent last;
    for (int i = 0; i < 200000; ++i) {
      // Mostly forward by up to 30 ms (the cached digits then mostly hold), sometimes back, far
      // or to an edge (negative, below 10^8, where the digits above the last 8 are none).
      switch (rng() % 16) {
        case 0:
          ts = pick(i64s, ts);
          break;
        case 1:
          ts -= static_cast<int64_t>(rng() % 200'000'000);
          break;
        default:
          ts += static_cast<int64_t>(rng() % 30'000'000);
      }
      // The thread, the configuration and the grid mostly those of the line before (the
      // encoder keeps their text), or one of them changed alone.
      LaunchEvent e = last;
      e.header = {ts, rng() % 8 == 0 ? pick(i32s, pid) : pid, pick(u64s, i)};
      if (rng() % 4 == 0) e.tid = pick(i32s, 12345);
      e.correlation_id = pick(u64s, i + 1);
      switch (rng() % 8) {
        case 0:
          e.config = pick(u64s, 1 + i % 40);
          break;
        case 1:
          e.grid = {pick(u32s, 132), pick(u32s, 1), pick(u32s, 1)};
          break;
        case 2:
          e.grid.z = pick(u32s, 2);
          break;
        case 3:
          e.config = pick(u64s, 1 + i % 40);
          e.grid.x = pick(u32s, 64);
          break;
        default:
          break;
      }
      e.graph_id.reset();
      e.graph_node_id.reset();
      e.waves.reset();
      e.tail_utilization.reset();
      e.timing_window.reset();
      if (rng() % 16 == 0) {
        e.graph_id = pick(u64s, 3);
        e.graph_node_id = pick(u64s, 4);
      }
      if (rng() % 16 == 0) {
        e.waves = 2.5;
        e.tail_utilization = 0.5;
      }
      e.recovered = rng() % 32 == 0;
      if (rng() % 2 == 0) e.timing_window = rng() % 2 == 0;
      const std::string expected = Reference(e);
      ASSERT_EQ(Fast(encoder, e), expected) << "launch " << i << " of pid " << pid;
      last = e;
    }
  }
}

// The line the fast path writes decodes back to the event (a check of the reference's own
// reader, independent of both writers' digits).
TEST(LaunchEncoderTest, LinesDecodeToTheEvent) {
  LaunchEncoder encoder(31337);
  LaunchEvent e;
  e.header = {1764374400123456789, 31337, kMaxU64};
  e.tid = std::numeric_limits<int32_t>::max();
  e.correlation_id = 0;
  e.config = kMaxU64;
  e.grid = {std::numeric_limits<uint32_t>::max(), 1, 65535};
  e.timing_window = true;
  const std::string line = Fast(encoder, e);
  const DecodeResult decoded = Decode(line);
  ASSERT_TRUE(decoded.ok()) << decoded.message << ": " << line;
  const auto* launch = std::get_if<OwnedLaunchEvent>(&decoded.event);
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->header, e.header);
  EXPECT_EQ(launch->tid, e.tid);
  EXPECT_EQ(launch->correlation_id, 0u);
  EXPECT_EQ(launch->config, kMaxU64);
  EXPECT_EQ(launch->grid.x, std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(launch->grid.z, 65535u);
  EXPECT_EQ(launch->timing_window, std::optional<bool>(true));
}

// Below the fast path's room the answer is Encode's: 0 below the line's length, nothing written
// from cap on; the line itself from its exact length up.
TEST(LaunchEncoderTest, SmallBuffersAreEncodesAndNeverOverrun) {
  constexpr char kCanary = '\x5A';
  LaunchEncoder encoder(4242);
  LaunchEvent e;
  e.header = {1764374400123456789, 4242, 123456};
  e.tid = 4243;
  e.correlation_id = 987654;
  e.config = 12;
  e.grid = {1024, 1, 1};
  e.timing_window = false;
  const std::string line = Reference(e);
  std::vector<char> buf(LaunchEncoder::kMaxLine + 64);
  for (size_t cap = 0; cap <= LaunchEncoder::kMaxLine + 1; ++cap) {
    std::memset(buf.data(), kCanary, buf.size());
    const size_t n = encoder.Encode(e, buf.data(), cap);
    if (cap < line.size()) {
      ASSERT_EQ(n, 0u) << "cap " << cap;
    } else {
      ASSERT_EQ(std::string(buf.data(), n), line) << "cap " << cap;
    }
    for (size_t i = cap; i < buf.size(); ++i) ASSERT_EQ(buf[i], kCanary) << "cap " << cap;
  }
}

TEST(LaunchEncoderTest, AllocatesNothing) {
  LaunchEncoder encoder(4242);
  LaunchEvent e;
  e.header = {1764374400123456789, 4242, 1};
  e.grid = {132, 1, 1};
  char buf[LaunchEncoder::kMaxLine];
  const int64_t before = test_support::AllocationsOnThisThread();
  size_t total = 0;
  for (int i = 0; i < 1000; ++i) {
    e.header.ts_ns += 25'000'000;
    e.header.seq = static_cast<uint64_t>(i);
    total += encoder.Encode(e, buf, sizeof(buf));
  }
  EXPECT_EQ(test_support::AllocationsOnThisThread(), before);
  EXPECT_GT(total, 0u);
}

}  // namespace
}  // namespace cuflight::schema
