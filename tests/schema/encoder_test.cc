#include "cuflight/schema/encoder.h"

#include <gtest/gtest.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sample_events.h"

namespace cuflight::schema {
namespace {

using nlohmann::json;
using testing::EncodeLine;
using testing::LossyEvents;
using testing::RealisticKernel;
using testing::RoundTripEvents;

std::vector<OwnedEvent> AllSamples() {
  std::vector<OwnedEvent> all = RoundTripEvents();
  for (OwnedEvent& e : LossyEvents()) all.push_back(std::move(e));
  all.emplace_back(RealisticKernel());
  return all;
}

template <class E>
std::string EncodeToString(const E& event) {
  std::string line(1 << 16, '\0');
  line.resize(Encode(event, line.data(), line.size()));
  return line;
}

TEST(EncoderTest, StatsLineIsExact) {
  StatsEvent stats;
  stats.header = {1732000000123456789, 4242, 17};
  stats.emitted = 18446744073709551615u;
  stats.dropped = 0;
  stats.ring_capacity = 65536;
  stats.interval_ns = 1000000000;
  stats.launches = 10;
  stats.filtered = 4;
  stats.dropped_ring_full = 3;
  stats.dropped_disconnected = 2;
  stats.dropped_backpressure = 5;
  stats.ring_high_water = 65535;
  stats.cpu_ns = 123456789;
  stats.timing_dropped = 9;
  stats.timing_dropped_stall_flush = 6;
  stats.occupancy_disagreements = 7;
  EXPECT_EQ(EncodeToString(stats),
            R"({"type":"stats","version":1,"ts_ns":1732000000123456789,"pid":4242,"seq":17,)"
            R"("emitted":18446744073709551615,"dropped":0,"ring_capacity":65536,)"
            R"("interval_ns":1000000000,"launches":10,"filtered":4,"dropped_ring_full":3,)"
            R"("dropped_disconnected":2,"dropped_backpressure":5,"timing_dropped":9,)"
            R"("timing_dropped_stall_flush":6,"occupancy_disagreements":7,"api_errors_routine":0,"api_errors_suppressed":0,)"
            R"("ring_high_water":65535,)"
            R"("cpu_ns":123456789})"
            "\n");
}

TEST(EncoderTest, ProcessEndLineIsExact) {
  ProcessEndEvent end;
  end.header = {1, 2, 3};
  end.exit_code = -11;
  end.emitted = 4;
  end.dropped = 5;
  end.launches = 6;
  end.filtered = 7;
  end.dropped_ring_full = 1;
  end.dropped_disconnected = 4;
  end.dropped_backpressure = 0;
  end.timing_dropped = 18446744073709551615u;
  end.occupancy_disagreements = 1;
  end.api_errors_routine = 12;
  end.api_errors_suppressed = 3;
  EXPECT_EQ(EncodeToString(end),
            R"({"type":"process_end","version":1,"ts_ns":1,"pid":2,"seq":3,"exit_code":-11,)"
            R"("emitted":4,"dropped":5,"launches":6,"filtered":7,"dropped_ring_full":1,)"
            R"("dropped_disconnected":4,"dropped_backpressure":0,)"
            R"("timing_dropped":18446744073709551615,"occupancy_disagreements":1,)"
            R"("api_errors_routine":12,"api_errors_suppressed":3})"
            "\n");
}

// timing_stopped and its reason go out together, after the other counters, only when timing
// stopped (schema/v1/process_end.schema.json: dependentRequired).
TEST(EncoderTest, TimingStoppedIsWrittenWithItsReasonOnlyWhenTimingStopped) {
  ProcessEndEvent end;
  end.header = {1, 2, 3};
  end.exit_code = 0;
  const std::string plain = EncodeToString(end);
  EXPECT_EQ(plain.find("timing_stopped"), std::string::npos) << plain;
  end.timing_stopped = 250;
  end.timing_stopped_reason = TimingStoppedReason::kRecordsStopped;
  EXPECT_EQ(EncodeToString(end),
            R"({"type":"process_end","version":1,"ts_ns":1,"pid":2,"seq":3,"exit_code":0,)"
            R"("emitted":0,"dropped":0,"launches":0,"filtered":0,"dropped_ring_full":0,)"
            R"("dropped_disconnected":0,"dropped_backpressure":0,"timing_dropped":0,)"
            R"("occupancy_disagreements":0,"api_errors_routine":0,"api_errors_suppressed":0,)"
            R"("timing_stopped":250,"timing_stopped_reason":"records_stopped"})"
            "\n");
  end.timing_stopped = 0;
  end.timing_stopped_reason = TimingStoppedReason::kUnavailable;
  const std::string unavailable = EncodeToString(end);
  EXPECT_NE(unavailable.find(R"("timing_stopped":0,"timing_stopped_reason":"unavailable"})"),
            std::string::npos)
      << unavailable;
}

TEST(EncoderTest, ProcessLostLineIsExact) {
  ProcessLostEvent lost;
  lost.header = {1732000000123456789, 4242, 99};
  lost.last_seq = 99;
  lost.reason = LostReason::kCollectorShutdown;
  lost.events_stored = 97;
  lost.events_lost = 2;
  EXPECT_EQ(EncodeToString(lost),
            R"({"type":"process_lost","version":1,"ts_ns":1732000000123456789,"pid":4242,)"
            R"("seq":99,"last_seq":99,"reason":"collector_shutdown","events_stored":97,)"
            R"("events_lost":2})"
            "\n");
  lost.header.seq = 0;
  lost.last_seq.reset();
  lost.reason = LostReason::kDisconnected;
  EXPECT_NE(EncodeToString(lost).find(R"(,"last_seq":null,"reason":"disconnected",)"),
            std::string::npos);
  // After a black box was read: how many of events_stored came from it, last.
  lost.events_recovered = 40;
  EXPECT_TRUE(EncodeToString(lost).ends_with(R"("events_lost":2,"events_recovered":40})"
                                             "\n"))
      << EncodeToString(lost);
}

// "recovered" marks what the collector made from a black box; it is written, last, only then.
TEST(EncoderTest, RecoveredOnlyWhenTrueAndLast) {
  OwnedKernelEvent k = RealisticKernel();
  std::string line = EncodeLine(k);
  EXPECT_EQ(line.find("recovered"), std::string::npos) << line;
  k.recovered = true;
  line = EncodeLine(k);
  EXPECT_TRUE(line.ends_with(R"(,"recovered":true})"
                             "\n"))
      << line;
  OwnedDeviceEvent d;
  EXPECT_EQ(EncodeLine(d).find("recovered"), std::string::npos);
  d.recovered = true;
  line = EncodeLine(d);
  EXPECT_TRUE(line.ends_with(R"("max_cluster_size":0,"recovered":true})"
                             "\n"))
      << line;
}

TEST(EncoderTest, ProcessCrashLineIsExact) {
  ProcessCrashEvent crash;
  crash.header = {1732000000123456789, 4242, 100};
  crash.signal = 7;
  crash.signal_name = "SIGBUS";
  crash.code = 2;
  crash.addr = 0x7f0000001000;
  crash.tid = 4250;
  crash.app_handler = true;
  crash.emitted = 99;
  crash.dropped = 1;
  crash.launches = 120;
  crash.filtered = 20;
  crash.dropped_ring_full = 1;
  crash.dropped_disconnected = 0;
  crash.dropped_backpressure = 18446744073709551615u;
  crash.timing_dropped = 3;
  EXPECT_EQ(EncodeToString(crash),
            R"({"type":"process_crash","version":1,"ts_ns":1732000000123456789,"pid":4242,)"
            R"("seq":100,"signal":7,"signal_name":"SIGBUS","code":2,"addr":139637976731648,)"
            R"("tid":4250,"app_handler":true,"emitted":99,"dropped":1,"launches":120,)"
            R"("filtered":20,"dropped_ring_full":1,"dropped_disconnected":0,)"
            R"("dropped_backpressure":18446744073709551615,"timing_dropped":3,)"
            R"("occupancy_disagreements":0,"api_errors_routine":0,"api_errors_suppressed":0})"
            "\n");
}

TEST(EncoderTest, ProcessStartLineIsExact) {
  const std::vector<std::string_view> argv = {"a"};
  const std::vector<std::pair<std::string_view, std::string_view>> config = {
      {"CUFLIGHT_SAMPLE", "10"}, {"CUFLIGHT_FILTER", "gemm\""}};
  ProcessStartEvent start;
  start.header = {1, 2, 0};
  start.exe = "/x";
  start.argv = argv;
  start.hostname = "h";
  start.start_ns = 3;
  start.cuflight_version = "0.1.0";
  start.cuda_driver_version = 13000;
  start.cupti_version = 26;
  start.ppid = 1;
  start.uid = 1000;
  start.config = config;
  start.instance_id = 18446744073709551615u;
  start.pid_ns = 4026531836;
  EXPECT_EQ(EncodeToString(start),
            R"({"type":"process_start","version":1,"ts_ns":1,"pid":2,"seq":0,"exe":"/x",)"
            R"("argv":["a"],"hostname":"h","start_ns":3,"cuflight_version":"0.1.0",)"
            R"("cuda_driver_version":13000,"cupti_version":26,"ppid":1,"uid":1000,)"
            R"("config":{"CUFLIGHT_SAMPLE":"10","CUFLIGHT_FILTER":"gemm\""},)"
            R"("instance_id":18446744073709551615,"pid_ns":4026531836})"
            "\n");
  start.uid = -1;
  start.config = {};
  start.instance_id = 0;
  start.pid_ns = 0;
  EXPECT_NE(EncodeToString(start).find(R"(,"uid":null,"config":{},"instance_id":0,"pid_ns":0})"),
            std::string::npos);
  // `truncated` is written only when something was cut.
  const std::array<std::string_view, 2> cut = {"argv", "exe"};
  start.truncated = cut;
  EXPECT_NE(EncodeToString(start).find(R"(,"pid_ns":0,"truncated":["argv","exe"]})"),
            std::string::npos);
}

TEST(EncoderTest, KernelLineIsExact) {
  KernelEvent k;
  k.header = {100, 7, 3};
  k.tid = 8;
  k.device = 1;
  k.context = 0xffffffffffffffff;
  k.stream = 2;
  k.correlation_id = 3;
  k.api = "cuLaunchKernelEx";
  k.name = "_Z1fv";
  k.demangled = "f()";
  k.grid = {4, 5, 6};
  k.block = {128, 1, 1};
  k.cluster = Dim3{2, 1, 1};
  k.num_regs = 32;
  k.static_shared_bytes = 1;
  k.dyn_shared_bytes = 2;
  k.local_bytes = 3;
  k.const_bytes = 4;
  k.max_threads_per_block = 1024;
  k.carveout = 50;
  k.cooperative = true;
  k.graph_id = 9;
  k.graph_node_id = 10;
  OccupancyFields& o = k.occupancy;
  o.max_active_blocks = 16;
  o.active_warps = 64;
  o.max_warps = 64;
  o.occupancy = 1;
  o.reg_occupancy = 1;
  o.smem_occupancy = 0.5;
  o.warp_occupancy = 1;
  o.block_occupancy = 2.0 / 3.0;
  o.barrier_occupancy = 1e-7;
  o.has_cluster = true;
  o.cluster_occupancy = 0.25;
  o.limiting_resource = Resource::kWarps;
  o.limiting_resources = MaskOf(Resource::kWarps) | MaskOf(Resource::kRegisters);
  o.allocated_regs_per_block = 4096;
  o.allocated_smem_per_block = 1024;
  o.waves = 0.1;
  o.tail_utilization = 0.1;
  o.regs_for_next_block = -1;
  o.smem_for_next_block = 4096;
  o.best_block_size = 256;
  EXPECT_EQ(
      EncodeToString(k),
      R"({"type":"kernel","version":1,"ts_ns":100,"pid":7,"seq":3,"tid":8,"device":1,)"
      R"("context":18446744073709551615,"stream":2,"correlation_id":3,"api":"cuLaunchKernelEx",)"
      R"j("name":"_Z1fv","demangled":"f()","grid":[4,5,6],"block":[128,1,1],"cluster":[2,1,1],)j"
      R"("num_regs":32,"static_shared_bytes":1,"dyn_shared_bytes":2,"local_bytes":3,)"
      R"("const_bytes":4,"max_threads_per_block":1024,"carveout":50,"cooperative":true,)"
      R"("graph_id":9,"graph_node_id":10,"max_active_blocks":16,)"
      R"("active_warps":64,"max_warps":64,"occupancy":1,"reg_occupancy":1,"smem_occupancy":0.5,)"
      R"("warp_occupancy":1,"block_occupancy":0.6666666666666666,"barrier_occupancy":1e-07,)"
      R"("cluster_occupancy":0.25,"limiting_resource":"warps",)"
      R"("limiting_resources":["registers","warps"],"allocated_regs_per_block":4096,)"
      R"("allocated_smem_per_block":1024,"waves":0.1,"tail_utilization":0.1,)"
      R"("regs_for_next_block":null,"smem_for_next_block":4096,"best_block_size":256})"
      "\n");
}

TEST(EncoderTest, GraphIdsOnlyWhenSetCooperativeAlways) {
  OwnedKernelEvent k = RealisticKernel();
  std::string line = EncodeLine(k);
  EXPECT_EQ(line.find(R"("graph_)"), std::string::npos) << line;
  EXPECT_NE(line.find(R"(,"cooperative":false,)"), std::string::npos) << line;
  k.graph_id = 0;
  k.graph_node_id = 18446744073709551615u;
  line = EncodeLine(k);
  EXPECT_NE(line.find(R"(,"graph_id":0,"graph_node_id":18446744073709551615,)"),
            std::string::npos)
      << line;
}

// The kernel_time of a graph's kernel node carries the node's ids after duration_ns (the encoder's
// fixed order, which the validator's fast path expects); an ordinary launch's has none.
TEST(EncoderTest, KernelTimeLineIsExactWithAndWithoutGraphIds) {
  KernelTimeEvent t;
  t.header = {1732000000123456789, 4242, 18};
  t.correlation_id = 4294967295u;
  t.device = 1;
  t.context = 18446744073709551615u;
  t.stream = 0;
  t.start_ns = 1000;
  t.end_ns = 3000;
  t.duration_ns = 2000;
  const std::string head =
      R"({"type":"kernel_time","version":1,"ts_ns":1732000000123456789,"pid":4242,"seq":18,)"
      R"("correlation_id":4294967295,"device":1,"context":18446744073709551615,"stream":0,)"
      R"("start_ns":1000,"end_ns":3000,"duration_ns":2000)";
  EXPECT_EQ(EncodeToString(t), head + "}\n");
  t.graph_id = 12;
  t.graph_node_id = 18446744073709551615u;
  EXPECT_EQ(EncodeToString(t), head + R"(,"graph_id":12,"graph_node_id":18446744073709551615})" +
                                   "\n");
}

TEST(EncoderTest, ClusterFieldsOnlyWithACluster) {
  OwnedKernelEvent k = RealisticKernel();
  k.occupancy.has_cluster = true;  // without `cluster` set, cluster_occupancy is not written
  std::string line = EncodeLine(k);
  EXPECT_EQ(line.find(R"("cluster)"), std::string::npos) << line;
  k.cluster = Dim3{2, 2, 1};
  line = EncodeLine(k);
  EXPECT_NE(line.find(R"("cluster":[2,2,1])"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("cluster_occupancy":)"), std::string::npos) << line;
  k.occupancy.has_cluster = false;
  line = EncodeLine(k);
  EXPECT_NE(line.find(R"("cluster":[2,2,1])"), std::string::npos) << line;
  EXPECT_EQ(line.find(R"("cluster_occupancy":)"), std::string::npos) << line;
}

TEST(EncoderTest, ProcessEndWritesNullExitCode) {
  ProcessEndEvent end;
  EXPECT_NE(EncodeToString(end).find(R"("exit_code":null,)"), std::string::npos);
  end.exit_code = -11;
  EXPECT_NE(EncodeToString(end).find(R"("exit_code":-11,)"), std::string::npos);
}

TEST(EncoderTest, ListsEncodeEmptyAndFull) {
  const std::vector<std::string_view> argv = {"a", "b\"c"};
  ProcessStartEvent start;
  start.argv = argv;
  EXPECT_NE(EncodeToString(start).find(R"("argv":["a","b\"c"],)"), std::string::npos);
  start.argv = {};
  EXPECT_NE(EncodeToString(start).find(R"("argv":[],)"), std::string::npos);
  const std::vector<uint64_t> ids = {1, 18446744073709551615u};
  ApiErrorEvent error;
  EXPECT_NE(EncodeToString(error).find(R"("last_correlation_ids":[]})"), std::string::npos);
  error.last_correlation_ids = ids;
  EXPECT_NE(EncodeToString(error).find(R"("last_correlation_ids":[1,18446744073709551615]})"),
            std::string::npos);
}

TEST(EncoderTest, EveryLineIsOneJsonObjectOnOneLine) {
  for (const OwnedEvent& event : AllSamples()) {
    const std::string line = EncodeLine(event);
    ASSERT_FALSE(line.empty());
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
    for (const char c : line.substr(0, line.size() - 1)) {
      EXPECT_GE(static_cast<unsigned char>(c), 0x20u) << line;
    }
    const json doc = json::parse(line);  // throws (fails the test) on invalid JSON or UTF-8
    EXPECT_TRUE(doc.is_object());
    EXPECT_EQ(doc.at("type"), EventTypeName(TypeOf(event)));
    EXPECT_EQ(doc.at("version"), kSchemaVersion);
  }
}

TEST(EncoderTest, NonFiniteNumbersNeverAppear) {
  for (const OwnedEvent& event : LossyEvents()) {
    const std::string line = EncodeLine(event);
    for (const char* bad : {"nan", "NaN", "inf", "Inf", "-0,", "-0}"}) {
      EXPECT_EQ(line.find(bad), std::string::npos) << bad << " in " << line;
    }
  }
}

TEST(EncoderTest, DoublesAreShortestRoundTrip) {
  for (const double v :
       {0.1, 0.375, 2.0 / 3.0, 1e-7, 5e-324, 0.30000000000000004, std::nextafter(1.0, 0.0)}) {
    KernelEvent k;
    k.occupancy.occupancy = v;
    k.occupancy.waves = v * 1e300;
    const json doc = json::parse(EncodeToString(k));
    EXPECT_EQ(doc.at("occupancy").get<double>(), v);
    EXPECT_EQ(doc.at("waves").get<double>(), v * 1e300);
  }
}

TEST(EncoderTest, IntegersMatchToString) {
  std::vector<uint64_t> values = {0, std::numeric_limits<uint64_t>::max()};
  for (uint64_t p = 1; p <= 10'000'000'000'000'000'000u; p *= 10) {
    for (const uint64_t v : {p - 1, p, p + 1, 2 * p - 1, 9 * p, 9 * p + p / 3}) values.push_back(v);
    if (p > std::numeric_limits<uint64_t>::max() / 10) break;
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) values.push_back(rng() >> (rng() % 64));
  char line[1024];
  for (const uint64_t v : values) {
    StatsEvent stats;
    stats.emitted = v;
    stats.interval_ns = static_cast<int64_t>(v >> 1);
    stats.cpu_ns = v;
    ApiErrorEvent error;
    error.code = static_cast<int32_t>(static_cast<uint32_t>(v));
    error.device = static_cast<int32_t>(v % 3) - 1;
    std::string text(line, Encode(stats, line, sizeof(line)));
    EXPECT_NE(text.find(",\"emitted\":" + std::to_string(v) + ","), std::string::npos) << text;
    EXPECT_NE(text.find(",\"interval_ns\":" + std::to_string(v >> 1) + ","), std::string::npos)
        << text;
    EXPECT_NE(text.find(",\"cpu_ns\":" + std::to_string(v) + "}"), std::string::npos) << text;
    text.assign(line, Encode(error, line, sizeof(line)));
    EXPECT_NE(text.find(",\"code\":" + std::to_string(error.code) + ","), std::string::npos)
        << text;
    EXPECT_NE(text.find(",\"device\":" + std::to_string(error.device) + ","), std::string::npos)
        << text;
  }
  ApiErrorEvent error;
  error.code = std::numeric_limits<int32_t>::min();
  EXPECT_NE(std::string(line, Encode(error, line, sizeof(line))).find(R"(,"code":-2147483648,)"),
            std::string::npos);
}

// The significant digits of a JSON number: no sign, point, exponent, or leading/trailing zeros.
std::string Digits(std::string_view number) {
  number = number.substr(0, number.find_first_of("eE"));
  std::string digits;
  for (const char c : number) {
    if (c >= '0' && c <= '9' && !(digits.empty() && c == '0')) digits += c;
  }
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  return digits;
}

// Encode writes doubles through a fast exact path or std::to_chars; either way the number parses
// back to the same double and has the same (shortest) digits std::to_chars gives.
TEST(EncoderTest, DoublesHaveTheDigitsOfToChars) {
  std::vector<double> values;
  for (int den = 1; den <= 400; ++den) {
    for (int num = 0; num <= den; ++num) values.push_back(static_cast<double>(num) / den);
  }
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 20000; ++i) {
    values.push_back(unit(rng));
    values.push_back(unit(rng) * 1e6);
    values.push_back(std::ldexp(unit(rng), static_cast<int>(rng() % 120) - 60));
    values.push_back(std::round(unit(rng) * 1e6) / 1e3);
  }
  for (int e = -20; e <= 20; ++e) {
    const double p = std::pow(10.0, e);
    for (const double v : {p, std::nextafter(p, 0.0), std::nextafter(p, 2 * p), 3 * p, 0.5 * p}) {
      values.push_back(v);
    }
  }
  values.push_back(9.999999999999999e14);
  values.push_back(999999999999999.9);
  values.push_back(1e15 - 1);
  values.push_back(123456789012345.6);
  KernelEvent k;
  char line[4096];
  for (const double v : values) {
    k.occupancy.waves = v;
    const size_t n = Encode(k, line, sizeof(line));
    ASSERT_GT(n, 0u);
    const std::string_view text(line, n);
    const size_t begin = text.find(R"("waves":)") + 8;
    const std::string number(text.substr(begin, text.find(',', begin) - begin));
    EXPECT_EQ(std::strtod(number.c_str(), nullptr), v) << number;
    char expected[64];
    const auto r = std::to_chars(expected, expected + sizeof(expected), v);
    EXPECT_EQ(Digits(number), Digits(std::string_view(expected, r.ptr - expected)))
        << number << " vs " << std::string_view(expected, r.ptr - expected);
  }
}

// For every cap below the line's length Encode returns 0 and leaves the bytes from cap on alone;
// at the exact length it writes the line.
TEST(EncoderTest, TooSmallBufferReturnsZeroAndNeverOverruns) {
  constexpr char kCanary = '\xA5';
  constexpr size_t kSlack = 32;
  for (const OwnedEvent& event : AllSamples()) {
    const std::string line = EncodeLine(event);
    const size_t n = line.size();
    std::vector<char> buf(n + kSlack);
    const std::vector<char> canaries(n + kSlack, kCanary);
    for (size_t cap = 0; cap < n; ++cap) {
      std::memset(buf.data(), kCanary, buf.size());
      ASSERT_EQ(Encode(event, buf.data(), cap), 0u) << "cap " << cap << " of " << n;
      ASSERT_EQ(std::memcmp(buf.data() + cap, canaries.data(), buf.size() - cap), 0)
          << "wrote past cap " << cap << " of " << n;
    }
    std::memset(buf.data(), kCanary, buf.size());
    ASSERT_EQ(Encode(event, buf.data(), n), n);
    EXPECT_EQ(std::string(buf.data(), n), line);
    EXPECT_EQ(buf[n], kCanary);
    // An exactly sized heap block lets AddressSanitizer see any overrun too.
    std::vector<char> exact(n);
    EXPECT_EQ(Encode(event, exact.data(), n), n);
    std::vector<char> short_by_one(n - 1);
    EXPECT_EQ(Encode(event, short_by_one.data(), n - 1), 0u);
  }
}

TEST(EncoderTest, NullBufferWithZeroCapacity) {
  EXPECT_EQ(Encode(StatsEvent{}, nullptr, 0), 0u);
  EXPECT_EQ(Encode(Event{KernelEvent{}}, nullptr, 0), 0u);
}

}  // namespace
}  // namespace cuflight::schema

namespace cuflight::schema {
namespace {

// The stand-alone occupancy object carries exactly the kernel event's occupancy members, with
// the same values, and nothing else.
TEST(EncodeOccupancyFields, SameMembersAsTheKernelEvent) {
  for (bool cluster : {false, true}) {
    OwnedKernelEvent k = testing::RealisticKernel();
    if (cluster) {
      k.cluster = Dim3{2, 1, 1};
      k.occupancy.has_cluster = true;
      k.occupancy.cluster_occupancy = 0.25;
    }
    const nlohmann::json event = nlohmann::json::parse(testing::EncodeLine(OwnedEvent(k)));
    char buf[2048];
    const size_t n = EncodeOccupancyFields(k.occupancy, buf, sizeof(buf));
    ASSERT_GT(n, 0u);
    ASSERT_EQ(buf[n - 1], '\n');
    const nlohmann::json occ = nlohmann::json::parse(std::string_view(buf, n));
    ASSERT_TRUE(occ.is_object());
    EXPECT_EQ(occ.size(), cluster ? 19u : 18u);  // 18 occupancy members + cluster_occupancy
    for (const auto& [key, value] : occ.items()) {
      ASSERT_TRUE(event.contains(key)) << key;
      EXPECT_EQ(event[key], value) << key;
    }
    EXPECT_TRUE(occ.contains("limiting_resources"));
    EXPECT_EQ(occ.contains("cluster_occupancy"), cluster);
    // Too small a buffer: 0, never a partial object.
    for (size_t cap = 0; cap < n; ++cap) {
      EXPECT_EQ(EncodeOccupancyFields(k.occupancy, buf, cap), 0u) << cap;
    }
  }
}

}  // namespace
}  // namespace cuflight::schema
