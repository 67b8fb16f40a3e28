// The collector in process, fed by raw sockets: exact storage, every kind of bad input answered
// with its counted reason while healthy producers lose nothing, seq accounting, dedup across
// reconnects and restarts, acks, process_lost, limits and timeouts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "collector.h"
#include "collector_test_util.h"
#include "cuflight/metrics/metrics.h"
#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"

namespace cuflight::collector {
namespace {

using testing::CapturedLog;
using testing::FindLog;
using testing::Identity;
using testing::LoggedLine;
using testing::ProducerIdentity;
using testing::Range;
using testing::RawClient;
using testing::ReadLog;
using testing::RunningCollector;
using testing::StoredSeqs;
using testing::TempDir;
using testing::TestOptions;
using testing::WaitUntil;

// process_start, then alternating kernel / kernel_time up to seq last - 1, then process_end.
std::string FullStream(const ProducerIdentity& id, uint64_t last) {
  std::string out = testing::ProcessStartLine(id, 0);
  for (uint64_t seq = 1; seq < last; ++seq) {
    out += (seq % 2 == 1) ? testing::KernelLine(id, seq, seq)
                          : testing::KernelTimeLine(id, seq, seq - 1);
  }
  out += testing::ProcessEndLine(id, last, last, 0);
  return out;
}

// Sends `stream` in pieces of varying size (1 byte up to 64 KiB) so lines cross reads.
bool SendInPieces(RawClient& client, std::string_view stream) {
  size_t piece = 1;
  while (!stream.empty()) {
    const size_t n = std::min(piece, stream.size());
    if (!client.Send(stream.substr(0, n))) return false;
    stream.remove_prefix(n);
    piece = piece * 7 % 65521 + 1;
  }
  return true;
}

nlohmann::json LastJson(const std::vector<LoggedLine>& lines) {
  return lines.empty() ? nlohmann::json() : nlohmann::json::parse(lines.back().text);
}

TEST(CollectorIngestTest, StoresEveryLineOfConcurrentProducersExactlyOnce) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);

  constexpr int kProducers = 6;
  constexpr uint64_t kLast = 3000;
  std::vector<std::thread> producers;
  std::atomic<int> acked{0};
  for (int i = 0; i < kProducers; ++i) {
    producers.emplace_back([&, i] {
      const ProducerIdentity id = Identity("app" + std::to_string(i), 1000 + i);
      RawClient client = RawClient::Unix(options.socket);
      ASSERT_TRUE(client.connected());
      ASSERT_TRUE(SendInPieces(client, FullStream(id, kLast)));
      if (client.WaitAck(kLast)) ++acked;
    });
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(acked.load(), kProducers);
  EXPECT_EQ(running.Stop(), 0);

  const IngestStats stats = running.stats();
  EXPECT_EQ(stats.lines_stored, kProducers * (kLast + 1));
  EXPECT_EQ(stats.lines_received, kProducers * (kLast + 1));
  EXPECT_EQ(stats.lines_rejected, 0u);
  EXPECT_EQ(stats.duplicates, 0u);
  EXPECT_EQ(stats.events_lost, 0u);
  EXPECT_EQ(stats.processes_ended, static_cast<uint64_t>(kProducers));
  EXPECT_EQ(stats.processes_lost, 0u);
  for (int i = 0; i < kProducers; ++i) {
    const auto file = FindLog(options.log_dir, "app" + std::to_string(i), getpid());
    ASSERT_FALSE(file.empty()) << i;
    const std::vector<LoggedLine> lines = ReadLog(file);
    EXPECT_EQ(StoredSeqs(lines), Range(0, kLast)) << file;
    ASSERT_EQ(lines.size(), kLast + 1);
    EXPECT_EQ(lines.front().type, "process_start");
    EXPECT_EQ(lines[1].type, "kernel");
    EXPECT_EQ(lines[2].type, "kernel_time");
    EXPECT_EQ(lines.back().type, "process_end");
  }
}

// Each kind of bad input on one identified connection, between good lines, and on fresh
// connections; a healthy producer streams meanwhile. Lines whose header is valid use a seq of
// their own (they are accounted for, not lost); lines without one use none.
TEST(CollectorIngestTest, BadInputIsCountedByReasonWhileHealthyProducersLoseNothing) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.max_line_bytes = 4096;
  CapturedLog log;
  Metrics metrics;
  RunningCollector running(options, &metrics, log.logger());
  ASSERT_NE(running.collector(), nullptr);

  constexpr uint64_t kHealthyLast = 20000;
  std::atomic<bool> healthy_acked{false};
  std::thread healthy([&] {
    RawClient client = RawClient::Unix(options.socket);
    ASSERT_TRUE(client.connected());
    ASSERT_TRUE(SendInPieces(client, FullStream(Identity("healthy", 1), kHealthyLast)));
    healthy_acked = client.WaitAck(kHealthyLast).has_value();
  });

  const ProducerIdentity bad = Identity("hostile", 2);
  const int32_t pid = bad.pid;
  auto header = [&](const char* type, uint64_t seq, int version = 1) {
    return std::string(R"({"type":")") + type + R"(","version":)" + std::to_string(version) +
           R"(,"ts_ns":1,"pid":)" + std::to_string(pid) + R"(,"seq":)" + std::to_string(seq);
  };
  std::string stream = testing::ProcessStartLine(bad, 0);
  stream += testing::KernelTimeLine(bad, 1, 1);
  stream += std::string(5000, 'x') + "\n";  // line_too_long
  stream += testing::KernelTimeLine(bad, 2, 2);
  stream += "{\"type\":\"kernel_time\",\n";       // malformed_json
  stream += "[1,2,3]\n";                          // not_an_object
  stream += header("kernel_time", 3, 2) + "}\n";  // unsupported_version
  stream += header("gpu_fire", 3) + "}\n";        // unknown_type (seq 3)
  stream += testing::KernelTimeLine(bad, 4, 4);
  stream += header("kernel_time", 5) +
            R"(,"correlation_id":1,"device":0,"context":0,"stream":0,"start_ns":0,"end_ns":1})"
            "\n";  // missing_field (seq 5)
  stream += header("kernel_time", 6) +
            R"(,"correlation_id":"one","device":0,"context":0,"stream":0,"start_ns":0,)"
            R"("end_ns":1,"duration_ns":1})"
            "\n";  // wrong_type (seq 6)
  stream += header("kernel_time", 7) +
            R"(,"correlation_id":1,"device":-7,"context":0,"stream":0,"start_ns":0,)"
            R"("end_ns":1,"duration_ns":1})"
            "\n";  // out_of_range (seq 7)
  stream += header("process_lost", 8) +
            R"(,"last_seq":null,"reason":"disconnected","events_stored":0,"events_lost":0})"
            "\n";  // reserved_type (seq 8)
  stream += testing::KernelTimeLine(bad, 9, 9);
  ProducerIdentity other = bad;
  other.start_ns = 999;
  stream += testing::ProcessStartLine(other, 10);  // identity_changed (seq 10)
  stream += testing::KernelTimeLine(bad, 11, 11);
  stream += "{\"type\":\"kernel_time\",\"version\":1";  // truncated_line at close

  RawClient hostile = RawClient::Unix(options.socket);
  ASSERT_TRUE(hostile.connected());
  ASSERT_TRUE(SendInPieces(hostile, stream));
  ASSERT_TRUE(hostile.WaitAck(11));

  RawClient early = RawClient::Unix(options.socket);  // no_process_start
  ASSERT_TRUE(early.Send(testing::KernelTimeLine(bad, 0, 0)));
  hostile.Close();

  healthy.join();
  EXPECT_TRUE(healthy_acked.load());
  ASSERT_TRUE(WaitUntil([&] {
    const IngestStats s = running.stats();
    return s.rejected_for(RejectReason::kTruncatedLine) == 1 &&
           s.rejected_for(RejectReason::kNoProcessStart) == 1;
  }));
  EXPECT_EQ(running.Stop(), 0);

  const IngestStats s = running.stats();
  const std::vector<std::pair<RejectReason, const char*>> expected = {
      {RejectReason::kLineTooLong, "line_too_long"},
      {RejectReason::kMalformedJson, "malformed_json"},
      {RejectReason::kNotAnObject, "not_an_object"},
      {RejectReason::kUnsupportedVersion, "unsupported_version"},
      {RejectReason::kUnknownType, "unknown_type"},
      {RejectReason::kMissingField, "missing_field"},
      {RejectReason::kWrongType, "wrong_type"},
      {RejectReason::kOutOfRange, "out_of_range"},
      {RejectReason::kReservedType, "reserved_type"},
      {RejectReason::kIdentityChanged, "identity_changed"},
      {RejectReason::kTruncatedLine, "truncated_line"},
      {RejectReason::kNoProcessStart, "no_process_start"},
  };
  const std::string logged = log.text();
  const std::string rendered = metrics.Render();
  for (const auto& [reason, name] : expected) {
    EXPECT_EQ(s.rejected_for(reason), 1u) << name;
    EXPECT_NE(logged.find(std::string("line rejected (") + name + ")"), std::string::npos)
        << name << " not logged";
    EXPECT_NE(rendered.find(std::string("reason=\"") + name + "\""), std::string::npos)
        << name << " not in the metrics";
  }
  EXPECT_EQ(s.lines_rejected, expected.size());
  // The messages name the field.
  EXPECT_NE(logged.find("duration_ns"), std::string::npos) << logged;
  EXPECT_NE(logged.find("correlation_id"), std::string::npos);

  // The hostile process: its good lines around the bad ones, no loss, then process_lost.
  const std::vector<LoggedLine> hostile_lines =
      ReadLog(FindLog(options.log_dir, "hostile", getpid()));
  EXPECT_EQ(StoredSeqs(hostile_lines), (std::vector<uint64_t>{0, 1, 2, 4, 9, 11}));
  const nlohmann::json lost = LastJson(hostile_lines);
  EXPECT_EQ(lost["type"], "process_lost");
  EXPECT_EQ(lost["reason"], "disconnected");
  EXPECT_EQ(lost["last_seq"], 11);
  EXPECT_EQ(lost["events_stored"], 6);
  EXPECT_EQ(lost["events_lost"], 0);

  // The healthy producer: everything, in order, nothing lost.
  const std::vector<LoggedLine> healthy_lines =
      ReadLog(FindLog(options.log_dir, "healthy", getpid()));
  EXPECT_EQ(StoredSeqs(healthy_lines), Range(0, kHealthyLast));
  EXPECT_EQ(s.events_lost, 0u);
}

// The producers' timing_dropped reaches cuflight_kernel_timing_dropped_total by its increases,
// per process: a report out of step (lower) adds nothing, and so does a line of an older
// producer without the field. Timing records are not events: the events' drops stay apart.
TEST(CollectorIngestTest, ProducersTimingDroppedCountsOnceInTheMetrics) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  CapturedLog log;
  Metrics metrics;
  RunningCollector running(options, &metrics, log.logger());
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity a = Identity("timed_a", 5);
  const ProducerIdentity b = Identity("timed_b", 6);
  std::string old_stats = testing::StatsLine(b, 2, 2, 0);
  const std::string field = R"(,"timing_dropped":0)";
  ASSERT_NE(old_stats.find(field), std::string::npos) << old_stats;
  old_stats.erase(old_stats.find(field), field.size());
  const std::string stream_a = testing::ProcessStartLine(a, 0) +
                               testing::StatsLine(a, 1, 1, 2, 4) +
                               testing::StatsLine(a, 2, 2, 2, 3) +  // out of step: no decrease
                               testing::StatsLine(a, 3, 3, 2, 7) +
                               testing::ProcessEndLine(a, 4, 4, 2, 9);
  const std::string stream_b = testing::ProcessStartLine(b, 0) +
                               testing::StatsLine(b, 1, 1, 0, 5) + old_stats +
                               testing::ProcessEndLine(b, 3, 3, 0, 5);
  RawClient client_a = RawClient::Unix(options.socket);
  RawClient client_b = RawClient::Unix(options.socket);
  ASSERT_TRUE(client_a.Send(stream_a));
  ASSERT_TRUE(client_b.Send(stream_b));
  ASSERT_EQ(client_a.WaitAck(4), 4u);
  ASSERT_EQ(client_b.WaitAck(3), 3u);
  running.Stop();

  const std::string rendered = metrics.Render();
  // a: 4, then 7 - 4, then 9 - 7; b: 5, then nothing more.
  EXPECT_NE(rendered.find("\ncuflight_kernel_timing_dropped_total 14\n"), std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("\ncuflight_events_dropped_total{reason=\"ring_full\"} 2\n"),
            std::string::npos)
      << rendered;
}

// api_error events reach cuflight_api_errors_total by their error_name, escaped or not. The
// codes are cuda.h's: CUDA_ERROR_ILLEGAL_ADDRESS = 700, CUDA_ERROR_INVALID_VALUE = 1.
TEST(CollectorIngestTest, ApiErrorsAreCountedByErrorNameInTheMetrics) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity a = Identity("faulty", 7);
  std::string escaped = testing::ApiErrorLine(a, 3, "CUDA_ERROR_INVALID_VALUE", 1);
  const std::string plain_name = R"("error_name":"CUDA_ERROR_INVALID_VALUE")";
  ASSERT_NE(escaped.find(plain_name), std::string::npos) << escaped;
  escaped.replace(escaped.find(plain_name), plain_name.size(),
                  R"("error_name":"CUDA_ERROR_INVALID_\u0056ALUE")");
  RawClient client = RawClient::Unix(options.socket);
  ASSERT_TRUE(client.Send(testing::ProcessStartLine(a, 0) +
                          testing::ApiErrorLine(a, 1, "CUDA_ERROR_ILLEGAL_ADDRESS", 700) +
                          testing::ApiErrorLine(a, 2, "CUDA_ERROR_ILLEGAL_ADDRESS", 700) + escaped +
                          testing::ProcessEndLine(a, 4, 4, 0)));
  ASSERT_EQ(client.WaitAck(4), 4u);
  running.Stop();
  const std::string rendered = metrics.Render();
  EXPECT_NE(rendered.find("\ncuflight_api_errors_total{error=\"CUDA_ERROR_ILLEGAL_ADDRESS\"} 2\n"),
            std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("\ncuflight_api_errors_total{error=\"CUDA_ERROR_INVALID_VALUE\"} 1\n"),
            std::string::npos)
      << rendered;
}

// A stall event as the injector writes it (docs/protocol.md, "Stalls"): the stalled streams with
// their oldest launches, (device, age of the first launch in ms) per stream.
std::string StallLine(const ProducerIdentity& id, uint64_t seq,
                      const std::vector<std::pair<int, int64_t>>& streams) {
  std::string line = R"({"type":"stall","version":1,"ts_ns":1732000000000000000,"pid":)" +
                     std::to_string(id.pid) + R"(,"seq":)" + std::to_string(seq) +
                     (streams.empty() ? R"(,"state":"resolved")" : R"(,"state":"stalled")") +
                     R"(,"stall_ms":10000,"stalled_ms":12000,"completed":0,"streams_stalled":)" +
                     std::to_string(streams.size()) + R"(,"streams":[)";
  for (size_t i = 0; i < streams.size(); ++i) {
    if (i > 0) line += ",";
    line += R"({"device":)" + std::to_string(streams[i].first) + R"(,"context":1,"stream":)" +
            std::to_string(10 + i) + R"(,"waiting_ms":)" + std::to_string(streams[i].second) +
            R"(,"unfinished":1,"launches":[{"correlation_id":)" + std::to_string(100 + i) +
            R"x(,"name":"_Z4spinPVi","demangled":"spin(int volatile*)","grid":[1,1,1],)x"
            R"("block":[32,1,1],"occupancy":0.5,"age_ms":)" +
            std::to_string(streams[i].second) + "}]}";
  }
  return line + "]}\n";
}

// The gauge of the oldest unfinished kernel follows a process's stall events: one series per
// GPU (the oldest of its streams), labelled by the UUID its device event gave the ordinal, gone
// when the stall resolves, and gone with the process.
TEST(CollectorIngestTest, StallEventsDriveTheOldestUnfinishedKernelGauge) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Identity("hung", 21);
  const std::string prefix =
      "cuflight_kernel_oldest_unfinished_seconds{hostname=\"testhost\",pid=\"" +
      std::to_string(getpid()) + "\",exe=\"hung\",UUID=\"";
  const std::string gpu0 = "GPU-7f3e0c1a-2b4d-4e6f-8a9b-0c1d2e3f4a5b";
  const std::string gpu1 = "MIG-1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c5d";
  // The gauge grows with the time since the event: read it.
  const auto value_of = [&](const std::string& rendered, const std::string& uuid) -> double {
    const size_t at = rendered.find(prefix + uuid + "\"");
    if (at == std::string::npos) return -1;
    const size_t value = rendered.find("} ", at);
    return std::stod(rendered.substr(value + 2));
  };
  RawClient client = RawClient::Unix(options.socket);
  ASSERT_TRUE(client.Send(testing::ProcessStartLine(id, 0) +
                          testing::DeviceLine(id, 1, 0, gpu0, "00000000:19:00.0") +
                          testing::DeviceLine(id, 2, 1, gpu1, "00000000:3B:00.0") +
                          StallLine(id, 3, {{0, 12000}, {0, 15500}, {1, 11000}})));
  ASSERT_EQ(client.WaitAck(3), 3u);
  std::string rendered = metrics.Render();
  EXPECT_NE(rendered.find("\ncuflight_processes_stalled 1\n"), std::string::npos) << rendered;
  EXPECT_GE(value_of(rendered, gpu0), 15.5);  // the older of ordinal 0's two streams
  EXPECT_LT(value_of(rendered, gpu0), 25.5);
  EXPECT_GE(value_of(rendered, gpu1), 11);
  EXPECT_LT(value_of(rendered, gpu1), 21);
  EXPECT_NE(rendered.find(gpu1 + "\",pci_bus_id=\"00000000:3B:00.0\",modelName=\"NVIDIA H100 80GB "
                                 "HBM3\"} "),
            std::string::npos)
      << rendered;
  // Resolved: no series left.
  ASSERT_TRUE(client.Send(StallLine(id, 4, {})));
  ASSERT_EQ(client.WaitAck(4), 4u);
  rendered = metrics.Render();
  EXPECT_EQ(rendered.find(prefix), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("\ncuflight_processes_stalled 0\n"), std::string::npos) << rendered;
  // Stalled again, then the process ends: gone with it.
  // Ordinal 2 was named by no device event: its GPU is unknown.
  ASSERT_TRUE(client.Send(StallLine(id, 5, {{2, 30000}})));
  ASSERT_EQ(client.WaitAck(5), 5u);
  EXPECT_GE(value_of(metrics.Render(), "unknown"), 30);
  ASSERT_TRUE(client.Send(testing::ProcessEndLine(id, 6, 6, 0)));
  ASSERT_EQ(client.WaitAck(6), 6u);
  rendered = metrics.Render();
  EXPECT_EQ(rendered.find(prefix), std::string::npos) << rendered;
  // A process that stalls and then is lost (its connection ends without process_end).
  const ProducerIdentity lost = Identity("lost", 22);
  RawClient other = RawClient::Unix(options.socket);
  ASSERT_TRUE(other.Send(testing::ProcessStartLine(lost, 0) + StallLine(lost, 1, {{0, 20000}})));
  ASSERT_EQ(other.WaitAck(1), 1u);
  EXPECT_NE(metrics.Render().find("exe=\"lost\""), std::string::npos);
  other.Close();
  EXPECT_TRUE(
      WaitUntil([&] { return metrics.Render().find("exe=\"lost\"") == std::string::npos; }));
  running.Stop();
}

// The producers' dropped_backpressure reaches cuflight_events_dropped_total{reason=
// "backpressure"} by its increases, per process, apart from the other reasons; a report out of
// step adds nothing, and nothing of it is left over as "other".
TEST(CollectorIngestTest, ProducersBackpressureDropsAreExportedUnderTheirOwnReason) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Identity("behind", 16);
  auto counters = [&](auto event, uint64_t seq, uint64_t backpressure) {
    event.header = schema::Header{1732000000000000000, id.pid, seq};
    event.emitted = seq;
    event.dropped_ring_full = 1;
    event.dropped_disconnected = 2;
    event.dropped_backpressure = backpressure;
    event.dropped = 1 + 2 + backpressure;
    std::string line(1024, '\0');
    line.resize(schema::Encode(event, line.data(), line.size()));
    return line;
  };
  schema::StatsEvent stats;
  stats.ring_capacity = 1024;
  stats.interval_ns = 1;
  schema::ProcessEndEvent end;
  const std::string stream = testing::ProcessStartLine(id, 0) + counters(stats, 1, 4) +
                             counters(stats, 2, 3) +  // out of step: no decrease
                             counters(end, 3, 10);
  RawClient client = RawClient::Unix(options.socket);
  ASSERT_TRUE(client.Send(stream));
  ASSERT_EQ(client.WaitAck(3), 3u);
  running.Stop();

  const std::string rendered = metrics.Render();
  // 4, then nothing, then 10 - 4.
  EXPECT_NE(rendered.find("\ncuflight_events_dropped_total{reason=\"backpressure\"} 10\n"),
            std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("\ncuflight_events_dropped_total{reason=\"disconnected\"} 2\n"),
            std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("\ncuflight_events_dropped_total{reason=\"ring_full\"} 1\n"),
            std::string::npos)
      << rendered;
  EXPECT_EQ(rendered.find("cuflight_events_dropped_total{reason=\"other\"}"), std::string::npos)
      << rendered;
}

TEST(CollectorIngestTest, SeqGapsAreCountedAsLostExactly) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Identity("gappy", 3);
  RawClient client = RawClient::Unix(options.socket);
  std::string stream = testing::ProcessStartLine(id, 0);
  for (uint64_t seq : {1, 2, 5, 6, 10, 11, 12, 20}) stream += testing::KernelTimeLine(id, seq, seq);
  ASSERT_TRUE(client.Send(stream));
  ASSERT_TRUE(client.WaitAck(20));
  client.Close();
  ASSERT_TRUE(WaitUntil([&] { return running.stats().processes_lost == 1; }));
  EXPECT_EQ(running.stats().events_lost, 2u + 3u + 7u);
  running.Stop();
  const std::vector<LoggedLine> lines = ReadLog(FindLog(options.log_dir, "gappy", getpid()));
  const nlohmann::json lost = LastJson(lines);
  EXPECT_EQ(lost["events_lost"], 12);
  EXPECT_EQ(lost["events_stored"], 9);
  EXPECT_EQ(lost["last_seq"], 20);
  EXPECT_EQ(lost["seq"], 20);
  EXPECT_EQ(lost["pid"], getpid());
}

TEST(CollectorIngestTest, ReconnectWithinTheGraceStoresEachSeqOnceAndWritesNoProcessLost) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.reconnect_grace = std::chrono::seconds(30);
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Identity("flappy", 4);

  RawClient first = RawClient::Unix(options.socket);
  std::string stream = testing::ProcessStartLine(id, 0) + testing::DeviceLine(id, 1, 0);
  for (uint64_t seq = 2; seq < 100; ++seq) stream += testing::KernelTimeLine(id, seq, seq);
  ASSERT_TRUE(first.Send(stream));
  ASSERT_EQ(first.WaitAck(99), 99u);
  first.Close();

  // The producer does not know what was stored after its last ack: it resends from 50.
  RawClient second = RawClient::Unix(options.socket);
  stream = testing::ProcessStartLine(id, 0) + testing::DeviceLine(id, 1, 0);
  for (uint64_t seq = 50; seq < 150; ++seq) stream += testing::KernelTimeLine(id, seq, seq);
  stream += testing::ProcessEndLine(id, 150, 151, 0);
  ASSERT_TRUE(second.Send(stream));
  ASSERT_EQ(second.WaitAck(150), 150u);
  second.Close();
  ASSERT_TRUE(WaitUntil([&] { return running.stats().connections_closed == 2; }));
  running.Stop();

  const IngestStats s = running.stats();
  EXPECT_EQ(s.duplicates, 2u + 50u);
  EXPECT_EQ(s.lines_stored, 151u);
  EXPECT_EQ(s.events_lost, 0u);
  EXPECT_EQ(s.processes_lost, 0u);
  EXPECT_EQ(s.processes_seen, 1u);
  const std::vector<LoggedLine> lines = ReadLog(FindLog(options.log_dir, "flappy", getpid()));
  EXPECT_EQ(StoredSeqs(lines), Range(0, 150));
  EXPECT_EQ(lines.back().type, "process_end");
}

TEST(CollectorIngestTest, ProcessLostFollowsTheGraceWhenTheProcessDoesNotReturn) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.reconnect_grace = std::chrono::milliseconds(200);
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Identity("crashy", 5);
  RawClient client = RawClient::Unix(options.socket);
  std::string stream = testing::ProcessStartLine(id, 0);
  for (uint64_t seq = 1; seq < 10; ++seq) stream += testing::KernelLine(id, seq, seq);
  ASSERT_TRUE(client.Send(stream));
  ASSERT_TRUE(client.WaitAck(9));
  const auto closed_at = std::chrono::steady_clock::now();
  client.Close();
  ASSERT_TRUE(WaitUntil([&] { return running.stats().processes_lost == 1; }));
  EXPECT_GE(std::chrono::steady_clock::now() - closed_at, std::chrono::milliseconds(200));
  running.Stop();
  const std::vector<LoggedLine> lines = ReadLog(FindLog(options.log_dir, "crashy", getpid()));
  ASSERT_EQ(lines.size(), 11u);
  const nlohmann::json lost = LastJson(lines);
  EXPECT_EQ(lost["type"], "process_lost");
  EXPECT_EQ(lost["reason"], "disconnected");
  EXPECT_EQ(lost["last_seq"], 9);
  EXPECT_EQ(lost["events_stored"], 10);
  EXPECT_EQ(lost["events_lost"], 0);
  // The collector's own line is a stored line too (what the lost-process alert counts).
  const std::string rendered = metrics.Render();
  EXPECT_NE(rendered.find("\ncuflight_events_stored_total{type=\"process_lost\"} 1\n"),
            std::string::npos)
      << rendered;
}

TEST(CollectorIngestTest, ShutdownDrainsWhatWasSentAndMarksLiveProcesses) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity live = Identity("live", 6);
  const ProducerIdentity done = Identity("done", 7);
  RawClient done_client = RawClient::Unix(options.socket);
  ASSERT_TRUE(done_client.Send(FullStream(done, 10)));
  ASSERT_TRUE(done_client.WaitAck(10));

  RawClient live_client = RawClient::Unix(options.socket);
  std::string stream = testing::ProcessStartLine(live, 0);
  for (uint64_t seq = 1; seq <= 5000; ++seq) stream += testing::KernelTimeLine(live, seq, seq);
  // send() on a Unix socket returns once the bytes are in the collector's receive queue.
  ASSERT_TRUE(live_client.Send(stream));
  EXPECT_EQ(running.Stop(), 0);

  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(options.socket)));
  const std::vector<LoggedLine> lines = ReadLog(FindLog(options.log_dir, "live", getpid()));
  EXPECT_EQ(StoredSeqs(lines), Range(0, 5000));
  const nlohmann::json lost = LastJson(lines);
  EXPECT_EQ(lost["type"], "process_lost");
  EXPECT_EQ(lost["reason"], "collector_shutdown");
  EXPECT_EQ(lost["last_seq"], 5000);
  EXPECT_EQ(lost["events_stored"], 5001);
  const std::vector<LoggedLine> done_lines = ReadLog(FindLog(options.log_dir, "done", getpid()));
  EXPECT_EQ(done_lines.back().type, "process_end");  // ended: no process_lost
  // What was stored before the close was acknowledged.
  EXPECT_EQ(live_client.WaitAck(5000), 5000u);
}

TEST(CollectorIngestTest, RestartRecoversTheHighestSeqFromTheLog) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  const ProducerIdentity id = Identity("survivor", 8);
  {
    RunningCollector first(options);
    ASSERT_NE(first.collector(), nullptr);
    RawClient client = RawClient::Unix(options.socket);
    std::string stream = testing::ProcessStartLine(id, 0);
    for (uint64_t seq = 1; seq < 50; ++seq) stream += testing::KernelTimeLine(id, seq, seq);
    ASSERT_TRUE(client.Send(stream));
    ASSERT_TRUE(client.WaitAck(49));
    EXPECT_EQ(first.Stop(), 0);
  }
  RunningCollector second(options);
  ASSERT_NE(second.collector(), nullptr);
  RawClient client = RawClient::Unix(options.socket);
  std::string stream = testing::ProcessStartLine(id, 0);
  for (uint64_t seq = 40; seq < 100; ++seq) stream += testing::KernelTimeLine(id, seq, seq);
  stream += testing::ProcessEndLine(id, 100, 101, 0);
  ASSERT_TRUE(client.Send(stream));
  ASSERT_EQ(client.WaitAck(100), 100u);
  EXPECT_EQ(second.Stop(), 0);
  const IngestStats s = second.stats();
  EXPECT_EQ(s.duplicates, 1u + 10u);
  EXPECT_EQ(s.events_lost, 0u);
  const std::vector<LoggedLine> lines = ReadLog(FindLog(options.log_dir, "survivor", getpid()));
  EXPECT_EQ(StoredSeqs(lines), Range(0, 100));
  // The first collector's shutdown marker sits between the two runs.
  ASSERT_EQ(lines.size(), 102u);
  EXPECT_EQ(lines[50].type, "process_lost");
}

TEST(CollectorIngestTest, PayloadPidIsReplacedByThePeerCredential) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  ProducerIdentity id = Identity("container", 9);
  id.pid = 4242;  // the pid as seen inside another pid namespace
  RawClient client = RawClient::Unix(options.socket);
  ASSERT_TRUE(client.Send(FullStream(id, 20)));
  ASSERT_TRUE(client.WaitAck(20));
  running.Stop();
  EXPECT_EQ(running.stats().pid_mismatch, 21u);
  const auto file = FindLog(options.log_dir, "container", getpid());
  ASSERT_FALSE(file.empty()) << "the file is named by the peer's pid";
  for (const LoggedLine& line : ReadLog(file)) EXPECT_EQ(line.pid, getpid()) << line.text;
}

TEST(CollectorIngestTest, TcpProducersAreKeyedByThePayloadPid) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.tcp = HostPort{"127.0.0.1", 0};
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  ASSERT_GT(running.collector()->tcp_port(), 0);
  ProducerIdentity id = Identity("remote", 10);
  id.pid = 31337;
  RawClient client = RawClient::Tcp(running.collector()->tcp_port());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send(FullStream(id, 30)));
  ASSERT_EQ(client.WaitAck(30), 30u);
  running.Stop();
  const auto file = FindLog(options.log_dir, "remote", 31337);
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(StoredSeqs(ReadLog(file)), Range(0, 30));
  EXPECT_EQ(running.stats().pid_mismatch, 0u);
}

TEST(CollectorIngestTest, ConnectionsBeyondTheLimitAreClosedAndCounted) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.max_connections = 3;
  options.max_connections_per_uid = 3;  // every client here has the test's uid
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  std::vector<RawClient> held;
  for (int i = 0; i < 3; ++i) held.push_back(RawClient::Unix(options.socket));
  ASSERT_TRUE(WaitUntil([&] { return running.stats().connections_accepted == 3; }));
  RawClient extra = RawClient::Unix(options.socket);
  ASSERT_TRUE(extra.connected());  // the kernel's backlog took it; the collector closes it
  EXPECT_TRUE(extra.WaitClosedByPeer());
  EXPECT_TRUE(WaitUntil([&] { return running.stats().connections_refused == 1; }));
  held.pop_back();  // frees a slot
  ASSERT_TRUE(WaitUntil([&] { return running.stats().connections_open == 2; }));
  RawClient next = RawClient::Unix(options.socket);
  ASSERT_TRUE(next.Send(FullStream(Identity("latecomer", 11), 5)));
  EXPECT_EQ(next.WaitAck(5), 5u);
}

TEST(CollectorIngestTest, SilentAndTricklingPeersAreClosedWithBoundedMemory) {
  TempDir dir;
  CollectorOptions options = TestOptions(dir.path());
  options.handshake_timeout = std::chrono::milliseconds(1000);
  options.max_line_bytes = 1024;
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);

  RawClient silent = RawClient::Unix(options.socket);
  RawClient trickle = RawClient::Unix(options.socket);
  RawClient identified = RawClient::Unix(options.socket);
  const ProducerIdentity id = Identity("quiet", 12);
  ASSERT_TRUE(identified.Send(testing::ProcessStartLine(id, 0)));
  ASSERT_TRUE(identified.WaitAck(0));
  // The trickler sends one byte at a time, never a newline, until the collector hangs up.
  std::atomic<bool> trickle_closed{false};
  std::thread trickler([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (!trickle.Send("x")) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    trickle_closed = trickle.WaitClosedByPeer(std::chrono::seconds(5));
  });
  EXPECT_TRUE(silent.WaitClosedByPeer());
  trickler.join();
  EXPECT_TRUE(trickle_closed.load());
  EXPECT_TRUE(WaitUntil([&] { return running.stats().handshake_timeouts == 2; }));
  const IngestStats s = running.stats();
  // Over 1 s the trickler sent far less than its first line's bound (kMaxProcessStartBytes, as
  // max_line_bytes is lower), or got line_too_long and nothing held: either way at most that
  // much was ever buffered for it.
  EXPECT_LE(s.rejected_for(RejectReason::kLineTooLong), 1u);
  // The identified producer, idle for longer than the timeout, is still served.
  ASSERT_TRUE(identified.Send(testing::KernelTimeLine(id, 1, 1)));
  EXPECT_EQ(identified.WaitAck(1), 1u);
}

TEST(CollectorIngestTest, AProducerThatNeverReadsAcksBlocksNobody) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);

  // The deaf producer never reads: its acks (one per small write) fill the collector's socket
  // send buffer, and later ones wait in the collector, which must not stall on them.
  RawClient deaf = RawClient::Unix(options.socket);
  const ProducerIdentity deaf_id = Identity("deaf", 13);
  constexpr uint64_t kDeafLast = 40000;
  std::thread deaf_thread([&] {
    std::string chunk = testing::ProcessStartLine(deaf_id, 0);
    for (uint64_t seq = 1; seq <= kDeafLast; ++seq) {
      chunk += testing::KernelTimeLine(deaf_id, seq, seq);
      if (chunk.size() > 4096 || seq == kDeafLast) {  // many small writes: many acks
        ASSERT_TRUE(deaf.Send(chunk));
        chunk.clear();
      }
    }
  });
  RawClient healthy = RawClient::Unix(options.socket);
  ASSERT_TRUE(SendInPieces(healthy, FullStream(Identity("hearing", 14), 20000)));
  EXPECT_EQ(healthy.WaitAck(20000), 20000u);
  deaf_thread.join();
  ASSERT_TRUE(WaitUntil([&] { return running.stats().lines_stored == 20001 + kDeafLast + 1; }));
  // Once the deaf producer reads, the latest ack arrives: only the last matters.
  EXPECT_EQ(deaf.WaitAck(kDeafLast), kDeafLast);
}

TEST(CollectorIngestTest, ReopenStartsNewFilesWhereTheOldOnesWere) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  RunningCollector running(options);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Identity("rotated", 15);
  RawClient client = RawClient::Unix(options.socket);
  std::string stream = testing::ProcessStartLine(id, 0);
  for (uint64_t seq = 1; seq < 10; ++seq) stream += testing::KernelTimeLine(id, seq, seq);
  ASSERT_TRUE(client.Send(stream));
  ASSERT_TRUE(client.WaitAck(9));
  const auto file = FindLog(options.log_dir, "rotated", getpid());
  ASSERT_FALSE(file.empty());
  std::filesystem::rename(file, file.string() + ".1");  // as logrotate would
  running.collector()->RequestReopen();
  ASSERT_TRUE(WaitUntil([&] { return running.stats().reopens == 1; }));
  stream.clear();
  for (uint64_t seq = 10; seq < 20; ++seq) stream += testing::KernelTimeLine(id, seq, seq);
  ASSERT_TRUE(client.Send(stream));
  ASSERT_TRUE(client.WaitAck(19));
  running.Stop();
  EXPECT_EQ(StoredSeqs(ReadLog(file.string() + ".1")), Range(0, 9));
  EXPECT_EQ(StoredSeqs(ReadLog(file)), Range(10, 19));
}

// The kernel nodes of one graph launch share its correlation id (CUPTI: a kernel record's
// correlationId is its launching API call's; graphNodeId tells the nodes apart). The collector
// reads graph_node_id from each stored kernel and kernel_time line and joins them per node: a
// 3-node graph replayed twice, nodes taking 1, 2 and 3 ms, gives 2, 4 and 6 ms per kernel name.
TEST(CollectorIngestTest, GpuTimeOfAGraphReplayIsJoinedPerNodeInTheMetrics) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  Metrics metrics;
  RunningCollector running(options, &metrics);
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Identity("graphs", 16);
  const char* names[] = {"node_a()", "node_b()", "node_c()"};
  std::string stream = testing::ProcessStartLine(id, 0);
  uint64_t seq = 1;
  std::vector<char> buf(1 << 16);
  for (uint64_t corr = 21; corr <= 22; ++corr) {
    for (uint64_t n = 0; n < 3; ++n) {
      schema::DecodeResult k = schema::Decode(testing::KernelLine(id, seq, corr));
      auto& kernel = std::get<schema::OwnedKernelEvent>(k.event);
      kernel.api = "cuGraphLaunch";
      kernel.demangled = names[n];
      kernel.graph_id = 4;
      kernel.graph_node_id = 0x7f0000000001 + n;
      stream.append(buf.data(), schema::Encode(kernel, buf.data(), buf.size()));
      ++seq;
      schema::DecodeResult t = schema::Decode(testing::KernelTimeLine(id, seq, corr));
      auto& time = std::get<schema::OwnedKernelTimeEvent>(t.event);
      time.duration_ns = (n + 1) * 1'000'000;
      time.end_ns = time.start_ns + time.duration_ns;
      time.graph_id = 4;
      time.graph_node_id = 0x7f0000000001 + n;
      stream.append(buf.data(), schema::Encode(time, buf.data(), buf.size()));
      ++seq;
    }
  }
  RawClient client = RawClient::Unix(options.socket);
  ASSERT_TRUE(client.Send(stream));
  ASSERT_EQ(client.WaitAck(seq - 1), seq - 1);
  running.Stop();
  EXPECT_EQ(running.stats().lines_rejected, 0u);

  const std::string rendered = metrics.Render();
  const std::string seconds = "\ncuflight_kernel_name_gpu_seconds_total{kernel=";
  for (const std::string& expected :
       {seconds + R"x("node_a()"} 0.002)x" + "\n", seconds + R"x("node_b()"} 0.004)x" + "\n",
        seconds + R"x("node_c()"} 0.006)x" + "\n",
        std::string("\ncuflight_kernel_time_unmatched_total 0\n"),
        std::string("\ncuflight_kernel_join_pending 0\n")}) {
    EXPECT_NE(rendered.find(expected), std::string::npos) << expected << "\n" << rendered;
  }
}

}  // namespace
}  // namespace cuflight::collector

namespace cuflight::collector {
namespace {

// The kernel_config (seq `seq`) and the launch (seq + 1) of testing::KernelLine(id, seq,
// correlation_id), the configuration's id being `config` (schema::Split, the producer's split).
std::pair<std::string, std::string> Interned(const ProducerIdentity& id, uint64_t seq,
                                             uint64_t correlation_id, uint64_t config) {
  const schema::DecodeResult d = schema::Decode(testing::KernelLine(id, seq, correlation_id));
  EXPECT_TRUE(d.ok()) << d.message;
  schema::OwnedKernelConfigEvent description;
  schema::OwnedLaunchEvent launch;
  schema::Split(std::get<schema::OwnedKernelEvent>(d.event), config, &description, &launch);
  launch.header.seq = seq + 1;
  std::string buf(64 << 10, '\0');
  std::pair<std::string, std::string> lines;
  lines.first.assign(buf.data(), schema::Encode(description, buf.data(), buf.size()));
  lines.second.assign(buf.data(), schema::Encode(launch, buf.data(), buf.size()));
  return lines;
}

// Interned configurations (docs/protocol.md): the collector refuses by name a launch naming a
// configuration never described and a description that changes a described one, keeps serving,
// and repeats a description in a new file before the first launch stored there, so that every
// file reads alone (each file read as one sequence, as the log reader does).
TEST(CollectorIngestTest, InternedConfigurationsAreCheckedAndEveryFileReadsAlone) {
  TempDir dir;
  const CollectorOptions options = TestOptions(dir.path());
  CapturedLog log;
  Metrics metrics;
  RunningCollector running(options, &metrics, log.logger());
  ASSERT_NE(running.collector(), nullptr);
  const ProducerIdentity id = Identity("interned", 16);
  const auto [config, launch] = Interned(id, 1, 100, 7);
  const auto [unused, unknown] = Interned(id, 2, 101, 8);  // launch seq 3
  auto [changed, unused_launch] = Interned(id, 4, 102, 7);  // description seq 4
  const std::string regs = R"("num_regs":)";
  ASSERT_NE(changed.find(regs), std::string::npos);
  changed.insert(changed.find(regs) + regs.size(), "1");  // another register count, same id
  RawClient client = RawClient::Unix(options.socket);
  std::string stream = testing::ProcessStartLine(id, 0) + config + launch;
  stream += unknown + changed;  // seq 3 (unknown_config), seq 4 (config_redefined)
  stream += testing::KernelTimeLine(id, 5, 100);  // served on: stored and acknowledged
  ASSERT_TRUE(client.Send(stream));
  ASSERT_TRUE(client.WaitAck(5));
  const auto file = FindLog(options.log_dir, "interned", getpid());
  ASSERT_FALSE(file.empty());
  std::filesystem::rename(file, file.string() + ".1");  // a new file from here on
  running.collector()->RequestReopen();
  ASSERT_TRUE(WaitUntil([&] { return running.stats().reopens == 1; }));
  const auto [config_again, launch_6] = Interned(id, 5, 103, 7);  // launch seq 6
  ASSERT_TRUE(client.Send(launch_6));
  ASSERT_TRUE(client.WaitAck(6));
  running.Stop();

  const std::vector<LoggedLine> first = ReadLog(file.string() + ".1");
  const std::vector<LoggedLine> second = ReadLog(file);
  std::vector<std::string> first_types;
  for (const LoggedLine& l : first) first_types.push_back(l.type);
  EXPECT_EQ(first_types, (std::vector<std::string>{"process_start", "kernel_config", "launch",
                                                   "kernel_time"}));
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[0].type, "kernel_config");  // the description again, with its seq
  EXPECT_EQ(second[0].seq, 1u);
  EXPECT_EQ(second[1].type, "launch");
  EXPECT_EQ(second[2].type, "process_lost");  // the collector stopped with the process live
  for (const auto* lines : {&first, &second}) {
    schema::ConfigExpander expander;
    for (const LoggedLine& l : *lines) {
      schema::DecodeResult d = schema::Decode(l.text);
      ASSERT_TRUE(d.ok()) << d.message;
      EXPECT_FALSE(schema::Refused(expander.Feed(&d.event))) << l.text;
    }
  }
  const std::string rendered = metrics.Render();
  EXPECT_NE(rendered.find("cuflight_events_rejected_total{reason=\"unknown_config\"} 1\n"),
            std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("cuflight_events_rejected_total{reason=\"config_redefined\"} 1\n"),
            std::string::npos)
      << rendered;
  // The two launches stored count as kernels, under their configuration's name and limit.
  EXPECT_NE(rendered.find("cuflight_kernel_name_launches_total{kernel=\"void "
                          "cutlass::Kernel<cutlass::gemm::kernel::Gemm>(Gemm::Params)\""),
            std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("} 2\n", rendered.find("cuflight_kernel_name_launches_total{")),
            std::string::npos)
      << rendered;
}

}  // namespace
}  // namespace cuflight::collector
