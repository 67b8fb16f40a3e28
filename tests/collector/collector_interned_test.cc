// The collector's path for interned launches (docs/protocol.md, "Interned configurations"): one
// look-up of the configuration per launch line, and the metrics' labels of a configuration
// resolved once. The tests hold it to the contract's own definitions, not to the collector's
// code: the metrics of interned launches to those of the same kernels sent whole, and the
// verdict on every forged, sparse or mutated line to the reference decoder's (the schema's
// rules over nlohmann/json, tests/support/reference_decoder.h) followed by the schema's reader
// table (schema::ConfigExpander).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "collector.h"
#include "collector_test_util.h"
#include "cuflight/metrics/metrics.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"
#include "ingest_stats.h"
#include "reference_decoder.h"

namespace cuflight::collector {
namespace {

using testing::LoggedLine;
using testing::ProducerIdentity;
using testing::RawClient;
using testing::ReadLog;
using testing::RunningCollector;
using testing::TempDir;
using testing::TestOptions;

ProducerIdentity Identity(const std::string& exe, std::string_view timing) {
  ProducerIdentity id = testing::Identity(exe, 1732000000000000000);
  id.config = {{"timing", std::string(timing)}};
  return id;
}

template <class E>
std::string Encode(const E& e) {
  std::string buf(64 << 10, '\0');
  buf.resize(schema::Encode(e, buf.data(), buf.size()));
  return buf;
}

// Three kernels of one process: testing::KernelLine's CUTLASS GEMM, and two more with their own
// names, limiting resources and occupancies.
struct Kernel {
  const char* demangled;
  schema::Resource limit;
  double occupancy;
};
constexpr std::array<Kernel, 3> kKernels = {{
    {"gemm(float*)", schema::Resource::kRegisters, 0.125},
    {"softmax(float*)", schema::Resource::kWarps, 1.0},
    {"reduce(float*)", schema::Resource::kSharedMem, 0.5},
}};

schema::OwnedKernelEvent KernelOf(const ProducerIdentity& id, uint64_t seq, uint64_t correlation_id,
                                  int k) {
  schema::DecodeResult d = schema::Decode(testing::KernelLine(id, seq, correlation_id));
  EXPECT_TRUE(d.ok()) << d.message;
  auto kernel = std::get<schema::OwnedKernelEvent>(d.event);
  kernel.demangled = kKernels[static_cast<size_t>(k)].demangled;
  kernel.occupancy.limiting_resource = kKernels[static_cast<size_t>(k)].limit;
  kernel.occupancy.limiting_resources = schema::MaskOf(kKernels[static_cast<size_t>(k)].limit);
  kernel.occupancy.occupancy = kKernels[static_cast<size_t>(k)].occupancy;
  return kernel;
}

// The kernel of launch i (0-based): gemm, softmax, gemm, reduce, gemm, softmax, ...
int KernelOfLaunch(int i) {
  static constexpr int kPattern[] = {0, 1, 0, 2};
  return kPattern[i % 4];
}

// A process's stream: process_start, a device, then `launches` launches, each followed by its
// kernel_time (duration (i + 1) ms) when `timed`; each launch a whole kernel line or, when
// `interned`, a launch line, preceded by its configuration's description at its first use.
// `last_seq` gets the stream's last seq.
std::string Stream(const ProducerIdentity& id, int launches, bool interned, bool timed,
                   uint64_t* last_seq) {
  std::string out = testing::ProcessStartLine(id, 0) + testing::DeviceLine(id, 1, 0);
  uint64_t seq = 2;
  std::array<bool, kKernels.size()> described{};
  for (int i = 0; i < launches; ++i) {
    const int k = KernelOfLaunch(i);
    const uint64_t corr = 1000 + 3 * static_cast<uint64_t>(i);
    if (!interned) {
      out += Encode(KernelOf(id, seq++, corr, k));
    } else {
      schema::OwnedKernelConfigEvent config;
      schema::OwnedLaunchEvent launch;
      schema::Split(KernelOf(id, seq, corr, k), 40 + static_cast<uint64_t>(k), &config, &launch);
      if (!described[static_cast<size_t>(k)]) {
        described[static_cast<size_t>(k)] = true;
        config.header.seq = seq++;
        out += Encode(config);
      }
      launch.header.seq = seq++;
      out += Encode(launch);
    }
    if (timed) {
      schema::DecodeResult t = schema::Decode(testing::KernelTimeLine(id, seq++, corr));
      auto& time = std::get<schema::OwnedKernelTimeEvent>(t.event);
      time.duration_ns = static_cast<uint64_t>(i + 1) * 1'000'000;
      time.end_ns = time.start_ns + time.duration_ns;
      out += Encode(time);
    }
  }
  *last_seq = seq - 1;
  return out;
}

// `exposition` without the series that count lines by type or bytes (an interned stream has
// other types and fewer bytes).
std::string WithoutCounts(const std::string& exposition) {
  std::istringstream in(exposition);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    if (line.find("cuflight_events_") != std::string::npos ||
        line.find("bytes") != std::string::npos ||
        line.find("cuflight_log_") != std::string::npos) {
      continue;
    }
    kept += line + "\n";
  }
  return kept;
}

// The exposition of the metrics once `stream` went through a collector (acknowledged, the
// process still connected), WithoutCounts unless `whole_text`.
std::string MetricsAfter(const std::string& stream, uint64_t last_seq, IngestStats* stats,
                         bool whole_text = false) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  Metrics metrics;
  RunningCollector running(options, &metrics);
  EXPECT_NE(running.collector(), nullptr);
  RawClient client = RawClient::Unix(options.socket);
  EXPECT_TRUE(client.Send(stream));
  EXPECT_EQ(client.WaitAck(last_seq), last_seq);
  // Before the stop, which writes the process off and forgets its pending launches.
  const std::string rendered = metrics.Render();
  running.Stop();
  *stats = running.stats();
  return whole_text ? rendered : WithoutCounts(rendered);
}

// Value of the sample line that starts with `series` (name and labels), or -1.
double Sample(const std::string& exposition, const std::string& series) {
  const size_t at = exposition.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(exposition.substr(at + series.size() + 2));
}

// 12 launches: gemm at 0, 2, 4, 6, 8, 10 (6), softmax at 1, 5, 9 (3), reduce at 3, 7, 11 (3).
// GPU time (launch i takes i + 1 ms): gemm 1+3+5+7+9+11 = 36 ms, softmax 2+6+10 = 18 ms,
// reduce 4+8+12 = 24 ms. Occupancy sums: gemm 6 x 0.125 = 0.75, softmax 3, reduce 1.5.
TEST(CollectorInternedTest, InternedLaunchesCountInTheMetricsAsTheKernelsSentWhole) {
  const ProducerIdentity id = Identity("interned_metrics", "all");
  uint64_t whole_last = 0;
  uint64_t interned_last = 0;
  IngestStats whole_stats;
  IngestStats interned_stats;
  const std::string whole_stream = Stream(id, 12, false, true, &whole_last);
  const std::string interned_stream = Stream(id, 12, true, true, &interned_last);
  const std::string whole = MetricsAfter(whole_stream, whole_last, &whole_stats);
  const std::string interned = MetricsAfter(interned_stream, interned_last, &interned_stats);
  EXPECT_EQ(whole_stats.lines_rejected, 0u);
  EXPECT_EQ(interned_stats.lines_rejected, 0u);
  EXPECT_EQ(interned_last, whole_last + 3);  // the three descriptions
  EXPECT_EQ(interned, whole);

  const std::string launches = "cuflight_kernel_name_launches_total{kernel=";
  EXPECT_EQ(Sample(interned, launches + R"x("gemm(float*)",limiting_resource="registers"})x"), 6);
  EXPECT_EQ(Sample(interned, launches + R"x("softmax(float*)",limiting_resource="warps"})x"), 3);
  EXPECT_EQ(Sample(interned, launches + R"x("reduce(float*)",limiting_resource="shared_mem"})x"),
            3);
  const std::string seconds = "cuflight_kernel_name_gpu_seconds_total{kernel=";
  EXPECT_DOUBLE_EQ(Sample(interned, seconds + R"x("gemm(float*)"})x"), 0.036);
  EXPECT_DOUBLE_EQ(Sample(interned, seconds + R"x("softmax(float*)"})x"), 0.018);
  EXPECT_DOUBLE_EQ(Sample(interned, seconds + R"x("reduce(float*)"})x"), 0.024);
  const std::string sum = "cuflight_kernel_name_occupancy_ratio_sum{kernel=";
  EXPECT_DOUBLE_EQ(Sample(interned, sum + R"x("gemm(float*)"})x"), 0.75);
  EXPECT_DOUBLE_EQ(Sample(interned, sum + R"x("softmax(float*)"})x"), 3);
  EXPECT_DOUBLE_EQ(Sample(interned, sum + R"x("reduce(float*)"})x"), 1.5);
  EXPECT_EQ(Sample(interned, "cuflight_kernel_time_unmatched_total"), 0);
  EXPECT_EQ(Sample(interned, "cuflight_kernel_join_pending"), 0);
}

// A process with timing off (CUFLIGHT_TIMING=off: no kernel_time at all, schema/env/README.md)
// has its launches counted and none left waiting in the join for a kernel_time that never comes.
TEST(CollectorInternedTest, LaunchesOfAProcessWithTimingOffWaitForNoKernelTime) {
  for (const bool interned : {false, true}) {
    SCOPED_TRACE(interned ? "interned" : "whole");
    const ProducerIdentity off = Identity("timing_off", "off");
    uint64_t last = 0;
    IngestStats stats;
    const std::string stream = Stream(off, 12, interned, false, &last);
    const std::string metrics = MetricsAfter(stream, last, &stats);
    EXPECT_EQ(stats.lines_rejected, 0u);
    EXPECT_EQ(Sample(metrics, R"x(cuflight_kernel_launches_by_timing_total{timing="off"})x"), 12);
    EXPECT_EQ(Sample(metrics, "cuflight_kernel_join_pending"), 0);
    EXPECT_EQ(Sample(metrics, "cuflight_kernel_join_evicted_total"), 0);
    EXPECT_EQ(Sample(metrics,
                     R"x(cuflight_kernel_name_launches_total{kernel="gemm(float*)",limiting_resource="registers"})x"),
              6);
  }
}

// A process with CUFLIGHT_TIMING=sampled says of each launch whether it was made in a timing
// window (`timing_window`, schema/README.md: false, "so none will come"). Most of its launches are
// outside one: remembered in the join, they would wait for a kernel_time that never comes and
// evict the launches whose kernel_time is coming. 12 launches, every fourth in a window (0, 4,
// 8: gemm, taking 1, 5 and 9 ms), the others not; whole kernel lines and interned launches.
TEST(CollectorInternedTest, LaunchesOutsideATimingWindowWaitForNoKernelTime) {
  for (const bool interned : {false, true}) {
    SCOPED_TRACE(interned ? "interned" : "whole");
    const ProducerIdentity id = Identity("sampled", "sampled");
    std::string stream = testing::ProcessStartLine(id, 0) + testing::DeviceLine(id, 1, 0);
    uint64_t seq = 2;
    std::array<bool, kKernels.size()> described{};
    for (int i = 0; i < 12; ++i) {
      const int k = KernelOfLaunch(i);
      const uint64_t corr = 1000 + static_cast<uint64_t>(i);
      const bool in_window = i % 4 == 0;
      schema::OwnedKernelEvent kernel = KernelOf(id, seq, corr, k);
      kernel.timing_window = in_window;
      if (!interned) {
        kernel.header.seq = seq++;
        stream += Encode(kernel);
      } else {
        schema::OwnedKernelConfigEvent config;
        schema::OwnedLaunchEvent launch;
        schema::Split(kernel, 40 + static_cast<uint64_t>(k), &config, &launch);
        ASSERT_EQ(launch.timing_window, std::optional<bool>(in_window));
        if (!described[static_cast<size_t>(k)]) {
          described[static_cast<size_t>(k)] = true;
          config.header.seq = seq++;
          stream += Encode(config);
        }
        launch.header.seq = seq++;
        stream += Encode(launch);
      }
      // The untimed launches' lines say so in the text the collector reads.
      ASSERT_NE(stream.rfind(in_window ? R"("timing_window":true)" : R"("timing_window":false)"),
                std::string::npos);
    }
    // The windows' kernel_time lines, after the launches (as an activity buffer delivers them).
    for (int i = 0; i < 12; i += 4) {
      schema::DecodeResult t = schema::Decode(
          testing::KernelTimeLine(id, seq++, 1000 + static_cast<uint64_t>(i)));
      auto& time = std::get<schema::OwnedKernelTimeEvent>(t.event);
      time.duration_ns = static_cast<uint64_t>(i + 1) * 1'000'000;
      time.end_ns = time.start_ns + time.duration_ns;
      stream += Encode(time);
    }
    IngestStats stats;
    const std::string metrics = MetricsAfter(stream, seq - 1, &stats);
    EXPECT_EQ(stats.lines_rejected, 0u);
    EXPECT_EQ(Sample(metrics, R"x(cuflight_kernel_launches_by_timing_total{timing="sampled"})x"),
              12);
    // Nothing left waiting, nothing evicted, every kernel_time joined to its gemm launch.
    EXPECT_EQ(Sample(metrics, "cuflight_kernel_join_pending"), 0);
    EXPECT_EQ(Sample(metrics, "cuflight_kernel_join_evicted_total"), 0);
    EXPECT_EQ(Sample(metrics, "cuflight_kernel_time_unmatched_total"), 0);
    EXPECT_DOUBLE_EQ(
        Sample(metrics, R"x(cuflight_kernel_name_gpu_seconds_total{kernel="gemm(float*)"})x"),
        0.015);  // 1 + 5 + 9 ms
    EXPECT_EQ(Sample(metrics,
                     R"x(cuflight_kernel_name_launches_total{kernel="gemm(float*)",limiting_resource="registers"})x"),
              6);
  }
}

// The value of the first sample line that starts with `prefix` (a family and the opening of
// its labels), or -1.
double SampleStartingWith(const std::string& exposition, const std::string& prefix) {
  const size_t at = exposition.find("\n" + prefix);
  if (at == std::string::npos) return -1;
  const size_t end = exposition.find('\n', at + 1);
  const size_t space = exposition.rfind(' ', end);
  return std::stod(exposition.substr(space + 1, end - space - 1));
}

// The collector counts a read's launches of one configuration at once (Metrics::Launches). The
// occupancy sums are doubles, and 0.1, 0.7 and 0.3 have no exact binary form, so the sums depend
// on the order of the additions: the metrics must be those of one launch at a time, in the
// order sent, as for the same kernels sent whole. 40 launches of a process with timing off (no
// kernel_time to break the runs), in runs of one to four of a kernel; the 21st is a whole
// kernel line in both streams (the runs around it, before and after its own counts).
TEST(CollectorInternedTest, RunsOfLaunchesSumTheirOccupancyOneLaunchAtATime) {
  constexpr std::array<double, 3> kOccupancy = {0.1, 0.7, 0.3};
  constexpr std::array<const char*, 3> kNames = {"a(float*)", "b(float*)", "c(float*)"};
  constexpr std::array<int, 20> kHalf = {0, 0, 0, 1, 1, 0, 2, 2, 2, 2, 0, 1, 0, 0, 2, 1, 1, 1, 0, 2};
  constexpr int kLaunches = 2 * static_cast<int>(kHalf.size());
  constexpr int kWhole = 20;  // sent as a kernel line in the interned stream too
  const auto kernel_of = [&](int i) { return kHalf[static_cast<size_t>(i) % kHalf.size()]; };
  const ProducerIdentity id = Identity("runs", "off");
  const auto kernel = [&](uint64_t seq, int i) {
    schema::OwnedKernelEvent k = KernelOf(id, seq, 1000 + 3 * static_cast<uint64_t>(i), 0);
    const auto which = static_cast<size_t>(kernel_of(i));
    k.demangled = kNames[which];
    k.occupancy.occupancy = kOccupancy[which];
    return k;
  };
  const auto stream = [&](bool interned, uint64_t* last) {
    std::string out = testing::ProcessStartLine(id, 0) + testing::DeviceLine(id, 1, 0);
    uint64_t seq = 2;
    std::array<bool, 3> described{};
    for (int i = 0; i < kLaunches; ++i) {
      if (!interned || i == kWhole) {
        out += Encode(kernel(seq++, i));
        continue;
      }
      schema::OwnedKernelConfigEvent config;
      schema::OwnedLaunchEvent launch;
      const auto which = static_cast<size_t>(kernel_of(i));
      schema::Split(kernel(seq, i), 70 + which, &config, &launch);
      if (!described[which]) {
        described[which] = true;
        config.header.seq = seq++;
        out += Encode(config);
      }
      launch.header.seq = seq++;
      out += Encode(launch);
    }
    *last = seq - 1;
    return out;
  };
  // The sums by hand: one addition per launch in the order sent, for the GPU (and the
  // workload) and for each name.
  double all = 0;
  std::array<double, 3> by_name{};
  for (int i = 0; i < kLaunches; ++i) {
    all += kOccupancy[static_cast<size_t>(kernel_of(i))];
    by_name[static_cast<size_t>(kernel_of(i))] += kOccupancy[static_cast<size_t>(kernel_of(i))];
  }
  // The order matters for these figures (else the test could not tell): each run added as
  // n * x, or every launch of a kernel added together, gives other doubles.
  double runs_as_products = 0;
  double by_kernel = 0;
  for (int i = 0; i < kLaunches;) {
    int j = i;
    while (j < kLaunches && kernel_of(j) == kernel_of(i)) ++j;
    runs_as_products += (j - i) * kOccupancy[static_cast<size_t>(kernel_of(i))];
    i = j;
  }
  for (size_t k = 0; k < by_name.size(); ++k) by_kernel += by_name[k];
  ASSERT_NE(runs_as_products, all);
  ASSERT_NE(by_kernel, all);
  ASSERT_NE(16 * kOccupancy[0], by_name[0]);  // a: 16 launches

  uint64_t whole_last = 0;
  uint64_t interned_last = 0;
  IngestStats whole_stats;
  IngestStats interned_stats;
  const std::string whole_stream = stream(false, &whole_last);
  const std::string interned_stream = stream(true, &interned_last);
  const std::string whole = MetricsAfter(whole_stream, whole_last, &whole_stats);
  const std::string interned =
      MetricsAfter(interned_stream, interned_last, &interned_stats, true);
  EXPECT_EQ(whole_stats.lines_rejected, 0u);
  EXPECT_EQ(interned_stats.lines_rejected, 0u);
  EXPECT_EQ(WithoutCounts(interned), whole);

  EXPECT_EQ(SampleStartingWith(interned, "cuflight_kernel_occupancy_ratio_sum{"), all);
  // (A process without attribution: the workload whose labels are all empty, written bare.)
  EXPECT_EQ(SampleStartingWith(interned, "cuflight_workload_kernel_occupancy_ratio_sum "), all);
  for (size_t k = 0; k < kNames.size(); ++k) {
    EXPECT_EQ(Sample(interned, "cuflight_kernel_name_occupancy_ratio_sum{kernel=\"" +
                                   std::string(kNames[k]) + "\"}"),
              by_name[k])
        << kNames[k];
  }
  // The lines by type, tallied per read: process_start, device, 3 descriptions, 39 launches and
  // the one kernel line, each received and stored once.
  for (const auto& [type, n] : std::map<std::string, double>{{"process_start", 1},
                                                             {"device", 1},
                                                             {"kernel_config", 3},
                                                             {"launch", kLaunches - 1},
                                                             {"kernel", 1},
                                                             {"kernel_time", 0}}) {
    EXPECT_EQ(Sample(interned, "cuflight_events_received_total{type=\"" + type + "\"}"), n)
        << type;
    EXPECT_EQ(Sample(interned, "cuflight_events_stored_total{type=\"" + type + "\"}"), n)
        << type;
  }
}

// ---- forged, sparse and mutated lines ----

// Where the header ends: past the digits of `"seq":`. Mutations go after it, so that every line
// keeps its type and its own seq (no duplicate or implausible seq: those are the collector's
// rules, not the configurations').
size_t HeaderEnd(const std::string& line) {
  size_t at = line.find(",\"seq\":") + 7;
  while (at < line.size() && line[at] >= '0' && line[at] <= '9') ++at;
  return at;
}

// `line` with its seq (the digits after `"seq":`) replaced by `seq`.
std::string WithSeq(std::string line, uint64_t seq) {
  const size_t from = line.find(",\"seq\":") + 7;
  return line.replace(from, HeaderEnd(line) - from, std::to_string(seq));
}

// One forged, sparse or mutated form of `line` (without its '\n'), from `rng`.
std::string Mutate(std::string line, std::mt19937_64& rng) {
  const size_t from = HeaderEnd(line);
  if (from >= line.size()) return line;
  const auto pick = [&rng](size_t lo, size_t hi) {  // in [lo, hi)
    return lo + static_cast<size_t>(rng() % (hi - lo));
  };
  static const std::string kBytes = "0123456789,:\"{}[]-.eE +x\\\x01\x7f\x80\xc3\xff";
  static const std::array<const char*, 9> kIds = {
      "40", "41", "42", "43", "0", "18446744073709551615", "18446744073709551616", "-1", "\"40\""};
  switch (rng() % 7) {
    case 0:  // a byte changed
      line[pick(from, line.size())] = kBytes[pick(0, kBytes.size())];
      return line;
    case 1: {  // bytes cut out (a sparse line)
      const size_t at = pick(from, line.size());
      return line.erase(at, pick(1, 24));
    }
    case 2: {  // a member left out
      std::vector<size_t> members;
      for (size_t at = line.find(",\"", from); at != std::string::npos; at = line.find(",\"", at + 1)) {
        members.push_back(at);
      }
      if (members.empty()) return line;
      const size_t i = pick(0, members.size());
      const size_t end = i + 1 < members.size() ? members[i + 1] : line.rfind('}');
      return line.erase(members[i], end - members[i]);
    }
    case 3: {  // a member written twice, the copy last (the last one counts)
      const size_t at = line.find(",\"", pick(from, line.size()));
      if (at == std::string::npos) return line;
      const size_t end = line.find(",\"", at + 1);
      const std::string member =
          line.substr(at, (end == std::string::npos ? line.rfind('}') : end) - at);
      return line.insert(line.rfind('}'), member);
    }
    case 4: {  // another configuration id: described, not yet, never, or not an id at all
      const size_t at = line.find("\"config\":");
      if (at == std::string::npos) return line;
      size_t end = at + 9;
      while (end < line.size() && line[end] != ',' && line[end] != '}') ++end;
      return line.replace(at + 9, end - at - 9, kIds[pick(0, kIds.size())]);
    }
    case 5: {  // whitespace where the encoder writes none (the validator's general path)
      const size_t at = line.find(':', pick(from, line.size()));
      if (at == std::string::npos) return line;
      return line.insert(at + 1, " ");
    }
    default: {  // a number changed in place: another value, maybe out of range
      const size_t at = line.find(':', pick(from, line.size()));
      if (at == std::string::npos || at + 1 >= line.size()) return line;
      static const std::array<const char*, 6> kNumbers = {"4294967296", "1.5", "-3", "2e400",
                                                          "0.25", "7"};
      size_t end = at + 1;
      while (end < line.size() && line[end] != ',' && line[end] != '}') ++end;
      return line.replace(at + 1, end - at - 1, kNumbers[pick(0, kNumbers.size())]);
    }
  }
}

// What the contract says of one line of a process's stream, the lines before it known: the
// reference decoder's Reason, else the schema's reader table's refusal, else "stored".
std::string Expected(const std::string& line, schema::ConfigExpander* expander) {
  schema::DecodeResult d = test_support::ReferenceDecode(line);
  if (!d.ok()) return std::string(schema::ReasonName(d.reason));
  const schema::ExpandVerdict verdict = expander->Feed(&d.event);
  if (schema::Refused(verdict)) return std::string(schema::ExpandVerdictName(verdict));
  return "stored";
}

// Every line of an interned stream, forged, sparse or mutated: the collector, with and without
// metrics, stores exactly the lines the contract accepts, in order, and refuses each other line
// under the reason the contract gives it, counted; it keeps serving the connection throughout.
TEST(CollectorInternedTest, ForgedAndMutatedInternedLinesGetTheContractsVerdicts) {
  const ProducerIdentity id = Identity("interned_forged", "all");
  uint64_t last = 0;
  const std::string base = Stream(id, 40, true, true, &last);
  std::mt19937_64 rng(35);
  std::string stream;
  std::vector<std::string> stored;  // the lines the contract accepts, in order
  std::map<std::string, uint64_t> refused;  // by reason
  schema::ConfigExpander expander;
  // Appends `form` (without its '\n') to the stream and to what the contract accepts or refuses;
  // returns the contract's verdict.
  const auto add = [&](const std::string& form) {
    const std::string verdict = Expected(form, &expander);
    if (verdict == "stored") {
      stored.push_back(form);
    } else {
      ++refused[verdict];
    }
    stream += form + "\n";
    return verdict;
  };
  // The first line of `base` that starts with `prefix`, without its '\n'.
  const auto first_line = [&base](std::string_view prefix) {
    const size_t at = base.find(prefix);
    return base.substr(at, base.find('\n', at) - at);
  };
  std::istringstream in(base);
  int mutated = 0;
  uint64_t seq = 0;
  for (std::string line; std::getline(in, line);) {
    // The preamble and the kernel_time lines as sent; each launch and description followed by
    // two mutated forms of it; every line with the next seq.
    const bool interned = line.find(R"({"type":"launch")") == 0 ||
                          line.find(R"({"type":"kernel_config")") == 0;
    std::vector<std::string> forms = {WithSeq(line, seq++)};
    if (interned) {
      for (int i = 0; i < 2; ++i) forms.push_back(Mutate(WithSeq(line, seq++), rng));
    }
    for (const std::string& form : forms) {
      if (form.find('\n') != std::string::npos) continue;
      add(form);
      if (&form != &forms.front()) ++mutated;
    }
  }
  // Forged by hand: the first description again (accepted), and again with another register
  // count under its id (config_redefined); a launch naming an id never described.
  const std::string first_description = first_line(R"({"type":"kernel_config")");
  std::string redefined = first_description;
  redefined.insert(redefined.find(R"("num_regs":)") + 11, "1");
  std::string undescribed = first_line(R"({"type":"launch")");
  undescribed.replace(undescribed.find(R"("config":)") + 9, 2, "77");
  for (const std::string& line : {first_description, redefined, undescribed}) {
    add(WithSeq(line, seq++));
  }

  // Descriptions beyond the table's bound, then a launch of the last one accepted and one of the
  // first one refused: docs/protocol.md, at most 4096 descriptions from one process. The stream
  // described 3 (ids 40-42) and its mutations may have described more (other ids): fill the
  // table to 4096 from id 1000 on, then one more.
  schema::DecodeResult base_config = schema::Decode(first_line(R"({"type":"kernel_config")"));
  ASSERT_TRUE(base_config.ok()) << base_config.message;
  auto description = std::get<schema::OwnedKernelConfigEvent>(base_config.event);
  const size_t described = expander.size();
  for (uint64_t i = 0; i + described < 4096 + 1; ++i) {
    description.header.seq = seq++;
    description.config = 1000 + i;
    const std::string line = Encode(description);
    EXPECT_EQ(add(line.substr(0, line.size() - 1)),
              i + described < 4096 ? "stored" : "config_flood")
        << i;
  }
  const uint64_t flooded = description.config;
  schema::DecodeResult base_launch = schema::Decode(first_line(R"({"type":"launch")"));
  ASSERT_TRUE(base_launch.ok()) << base_launch.message;
  auto launch = std::get<schema::OwnedLaunchEvent>(base_launch.event);
  for (const uint64_t config : {flooded - 1, flooded}) {
    launch.header.seq = seq++;
    launch.config = config;
    const std::string line = Encode(launch);
    EXPECT_EQ(add(line.substr(0, line.size() - 1)),
              config == flooded ? "unknown_config" : "stored");
  }
  const std::string end = testing::KernelTimeLine(id, seq, 1);  // served on to the end
  stream += end;
  stored.push_back(end.substr(0, end.size() - 1));
  // The mutations reached every refusal and still left lines accepted (the test's own check).
  EXPECT_GT(mutated, 60);
  for (const char* reason : {"unknown_config", "config_redefined", "config_flood", "malformed_json",
                             "missing_field", "wrong_type", "out_of_range"}) {
    EXPECT_TRUE(refused.contains(reason)) << reason;
  }

  for (const bool with_metrics : {true, false}) {
    SCOPED_TRACE(with_metrics ? "with metrics" : "without metrics");
    TempDir dir;
    const CollectorOptions options = TestOptions(dir.path());
    Metrics metrics;
    RunningCollector running(options, with_metrics ? &metrics : nullptr);
    ASSERT_NE(running.collector(), nullptr);
    RawClient client = RawClient::Unix(options.socket);
    ASSERT_TRUE(client.Send(stream));
    ASSERT_EQ(client.WaitAck(seq), seq);
    running.Stop();
    const IngestStats stats = running.stats();
    std::map<std::string, uint64_t> counted;
    for (int r = 1; r < kRejectReasonSlots; ++r) {
      if (stats.rejected[static_cast<size_t>(r)] > 0) {
        counted[std::string(RejectReasonName(static_cast<RejectReason>(r)))] =
            stats.rejected[static_cast<size_t>(r)];
      }
    }
    EXPECT_EQ(counted, refused);
    const auto file = testing::FindLog(options.log_dir, "interned_forged", getpid());
    std::vector<std::string> logged;
    for (const LoggedLine& l : ReadLog(file)) {
      if (l.type != "process_lost") logged.push_back(l.text);
    }
    EXPECT_EQ(logged, stored);
    if (with_metrics) {
      const std::string rendered = metrics.Render();
      for (const auto& [reason, n] : refused) {
        EXPECT_EQ(Sample(rendered, "cuflight_events_rejected_total{reason=\"" + reason + "\"}"),
                  static_cast<double>(n))
            << reason;
      }
    }
  }
}

// A launch may name only what its own process described: another process's id is unknown to
// it, though the collector knows it (docs/protocol.md).
TEST(CollectorInternedTest, ALaunchNamingAnotherProcesssConfigurationIsUnknownToIt) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity a = Identity("describes", "all");
  ProducerIdentity b = Identity("borrows", "all");
  uint64_t last_a = 0;
  const std::string stream_a = Stream(a, 4, true, false, &last_a);  // describes 40, 41, 42
  RawClient client_a = RawClient::Unix(options.socket);
  ASSERT_TRUE(client_a.Send(stream_a));
  ASSERT_EQ(client_a.WaitAck(last_a), last_a);
  schema::OwnedKernelConfigEvent config;
  schema::OwnedLaunchEvent launch;
  schema::Split(KernelOf(b, 2, 5, 0), 40, &config, &launch);
  RawClient client_b = RawClient::Unix(options.socket);
  ASSERT_TRUE(client_b.Send(testing::ProcessStartLine(b, 0) + testing::DeviceLine(b, 1, 0) +
                            Encode(launch) + testing::KernelTimeLine(b, 3, 5)));
  ASSERT_EQ(client_b.WaitAck(3), 3u);
  running.Stop();
  EXPECT_EQ(running.stats().rejected[static_cast<size_t>(RejectReason::kUnknownConfig)], 1u);
  EXPECT_EQ(running.stats().lines_rejected, 1u);
}

}  // namespace
}  // namespace cuflight::collector
