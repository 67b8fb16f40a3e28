// The exporter's parts on their own: the OTLP retry rules, the option texts, the cursor file,
// the segment reader over plain and zstd files, and the Resource made of a process_start.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>

#include "cursor.h"
#include "cuflight/exporter/exporter.h"
#include "log_records.h"
#include "otlp_http.h"
#include "stream_reader.h"
#include "temp_dir.h"
#include "zstd_file.h"

namespace cuflight::exporter {
namespace {

using std::chrono::milliseconds;
using test_support::TempDir;

// RFC 9110 10.2.3: delay-seconds, or an HTTP-date; the example date of RFC 9110 5.6.7.
TEST(OtlpRetry, RetryAfterIsSecondsOrAnHttpDate) {
  const auto now = std::chrono::system_clock::from_time_t(784111777);  // 1994-11-06 08:49:37 UTC
  EXPECT_EQ(ParseRetryAfter("3", now), milliseconds(3000));
  EXPECT_EQ(ParseRetryAfter(" 0 ", now), milliseconds(0));
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:47 GMT", now), milliseconds(10000));
  EXPECT_EQ(ParseRetryAfter("Sun, 06 Nov 1994 08:49:27 GMT", now), milliseconds(0));  // past
  EXPECT_EQ(ParseRetryAfter("86400", now), std::chrono::milliseconds(kMaxRetryAfter));
  EXPECT_EQ(ParseRetryAfter("soon", now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-1", now), std::nullopt);
}

// initial x 1.5^n, capped, times a jitter in [0.5, 1.5).
TEST(OtlpRetry, BackoffGrowsByHalfWithJitterUpToItsMaximum) {
  Backoff b(milliseconds(100), milliseconds(1000));
  const double bases[] = {100, 150, 225, 337.5, 506.25, 759.375, 1000, 1000};
  for (double base : bases) {
    const auto d = b.Next().count();
    EXPECT_GE(d, static_cast<int64_t>(base * 0.5) - 1);
    EXPECT_LT(d, static_cast<int64_t>(base * 1.5) + 1);
  }
  b.Reset();
  EXPECT_LT(b.Next().count(), 150);
}

TEST(OtlpOptions, EndpointGetsTheLogsPathWhenItHasNone) {
  std::string e, why;
  ASSERT_TRUE(ParseEndpoint("http://otel:4318", &e, &why));
  EXPECT_EQ(e, "http://otel:4318/v1/logs");
  ASSERT_TRUE(ParseEndpoint("https://otel:4318/", &e, &why));
  EXPECT_EQ(e, "https://otel:4318/v1/logs");
  ASSERT_TRUE(ParseEndpoint("http://[::1]:4318/otlp/v1/logs", &e, &why));
  EXPECT_EQ(e, "http://[::1]:4318/otlp/v1/logs");
  EXPECT_FALSE(ParseEndpoint("otel:4318", &e, &why));
  EXPECT_FALSE(ParseEndpoint("http://user:pw@otel:4318", &e, &why));
  EXPECT_FALSE(ParseEndpoint("http:///v1/logs", &e, &why));
}

// OTEL_EXPORTER_OTLP_HEADERS: comma-separated key=value, values percent-encoded.
TEST(OtlpOptions, HeadersAreKeyValuePairsPercentDecoded) {
  std::vector<std::pair<std::string, std::string>> h;
  std::string why;
  ASSERT_TRUE(ParseHeaders("api-key=abc%3D%3D, X-Scope-OrgID = team%20a", &h, &why)) << why;
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0], (std::pair<std::string, std::string>{"api-key", "abc=="}));
  EXPECT_EQ(h[1], (std::pair<std::string, std::string>{"X-Scope-OrgID", "team a"}));
  EXPECT_FALSE(ParseHeaders("novalue", &h, &why));
  EXPECT_FALSE(ParseHeaders("bad key=1", &h, &why));
  EXPECT_FALSE(ParseHeaders("k=%0D%0Ainjected: 1", &h, &why));
  EXPECT_FALSE(ParseHeaders("k=%4", &h, &why));
}

TEST(OtlpOptions, TlsFilesNeedHttpsAndCertAndKeyGoTogether) {
  ExportOptions o;
  o.endpoint = "http://otel:4318/v1/logs";
  o.ca_file = "/etc/hostname";
  std::string why;
  EXPECT_FALSE(CheckOptions(o, &why));
  o.endpoint = "https://otel:4318/v1/logs";
  EXPECT_TRUE(CheckOptions(o, &why)) << why;
  o.client_cert_file = "/etc/hostname";
  EXPECT_FALSE(CheckOptions(o, &why));
  o.ca_file = "/nonexistent/ca.pem";
  o.client_cert_file.clear();
  EXPECT_FALSE(CheckOptions(o, &why));
}

TEST(OtlpCursor, SavedAndLoadedAndADamagedOneIsRefused) {
  TempDir dir;
  const auto file = dir.path() / "cursor.json";
  Cursor c, back;
  std::string error;
  ASSERT_TRUE(LoadCursor(file, &back, &error));  // none yet: empty
  EXPECT_TRUE(back.empty());
  c["2026-11-28/a-b-1-2"] = {{3, 4096}, false};
  c["2026-11-28/c-d-5-6"] = {{1, 0}, true};
  ASSERT_TRUE(SaveCursor(file, c, &error)) << error;
  EXPECT_FALSE(std::filesystem::exists(file.string() + ".tmp"));
  ASSERT_TRUE(LoadCursor(file, &back, &error)) << error;
  EXPECT_EQ(back, c);
  std::ofstream(file) << "{\"version\":1,\"streams\":{\"x\":{\"segment\":0,\"offset\":1}}}";
  EXPECT_FALSE(LoadCursor(file, &back, &error));
  EXPECT_NE(error.find("not an exporter cursor"), std::string::npos) << error;
}

// Complete lines only, from a line's end; a zstd segment read from an uncompressed offset.
TEST(OtlpStreamReader, CompleteLinesFromAnOffsetInPlainAndZstdFiles) {
  TempDir dir;
  const std::string text = "{\"a\":1}\n{\"b\":22}\n{\"c\":333}\n{\"torn";
  std::ofstream(dir.path() / "s.1.jsonl") << text;
  std::string error;
  base::ScopedFd d(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY));
  for (bool compressed : {false, true}) {
    std::string name = "s.1.jsonl";
    if (compressed) {
      ASSERT_TRUE(logstore::CompressFileAtomically(dir.path() / "s.1.jsonl",
                                                   dir.path() / "s.1.jsonl.zst", 3, &error));
      name += ".zst";
    }
    auto r = SegmentReader::Open({d.Get(), name, name}, compressed, 8, &error);
    ASSERT_NE(r, nullptr) << error;
    std::string_view line;
    ASSERT_EQ(r->Next(&line, &error), SegmentReader::Status::kLine);
    EXPECT_EQ(line, "{\"b\":22}");
    EXPECT_EQ(r->offset(), 17u);  // 8 + 9
    ASSERT_EQ(r->Next(&line, &error), SegmentReader::Status::kLine);
    EXPECT_EQ(line, "{\"c\":333}");
    EXPECT_EQ(r->offset(), 27u);
    EXPECT_EQ(r->Next(&line, &error), SegmentReader::Status::kEnd);
    EXPECT_EQ(r->offset(), 27u);  // the torn line is not taken
  }
  // The plain file grows: the torn line completes and is read from where the reader stopped.
  auto r = SegmentReader::Open({d.Get(), "s.1.jsonl", "s.1.jsonl"}, false, 27, &error);
  std::string_view line;
  EXPECT_EQ(r->Next(&line, &error), SegmentReader::Status::kEnd);
  std::ofstream(dir.path() / "s.1.jsonl", std::ios::app) << "\":4}\n";
  ASSERT_EQ(r->Next(&line, &error), SegmentReader::Status::kLine);
  EXPECT_EQ(line, "{\"torn\":4}");
}

TEST(OtlpStreamReader, ListsStreamsWithTheirSegments) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "2026-11-28");
  for (const char* f : {"h-x-1-2.jsonl", "h-x-1-2.000001.jsonl.zst", "h-x-1-2.000002.jsonl",
                        "h-x-1-2.000003.jsonl.zst.tmp", "h-y-3-4.000001.jsonl.zst", "notes.txt"}) {
    std::ofstream(dir.path() / "2026-11-28" / f) << "x";
  }
  base::ScopedFd d(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY));
  std::map<std::string, StreamFiles> streams;
  std::string error;
  ASSERT_TRUE(ListStreams(d.Get(), &streams, &error)) << error;
  ASSERT_EQ(streams.size(), 2u);
  const StreamFiles& x = streams.at("2026-11-28/h-x-1-2");
  EXPECT_TRUE(x.active);
  EXPECT_EQ(x.closed, (std::map<uint64_t, bool>{{1, true}, {2, false}}));
  EXPECT_FALSE(streams.at("2026-11-28/h-y-3-4").active);
}

// The Resource by OpenTelemetry's semantic conventions where they have a name
// (host.name, process.pid, process.command_args, k8s.pod.uid, container.id), cuflight.* else.
TEST(OtlpRecords, ResourceNamesTheProcessItsAttributionAndItsGpu) {
  StreamIdentity id;
  id.stream = "node7-python3-4711-1700000000000000000";
  schema::OwnedProcessStartEvent s;
  s.header = {1700000000000000000, 4711, 0};
  s.exe = "/usr/bin/python3";
  s.argv = {"python3", "train.py"};
  s.hostname = "node7";
  s.uid = 1000;
  s.attribution = {{"RANK", "3"},     {"SLURM_JOB_ID", "4242"}, {"container_id", "abc"},
                   {"job", "4242"},   {"pod_uid", "u-1"},       {"rank", "3"},
                   {"world_size", "8"}};
  id.start = s;
  id.gpus[0] = {"GPU-00000000-1111-2222-3333-444444444444", "00000000:19:00.0", "H100"};
  id.first_device = 0;
  opentelemetry::proto::resource::v1::Resource r;
  FillResource(id, &r);
  std::map<std::string, std::string> a;
  for (const auto& kv : r.attributes()) {
    const auto& v = kv.value();
    a[kv.key()] = v.has_string_value() ? v.string_value()
                  : v.has_int_value()  ? "int:" + std::to_string(v.int_value())
                                       : "array:" + std::to_string(v.array_value().values_size());
  }
  const std::map<std::string, std::string> want = {
      {"cuflight.stream", id.stream},
      {"service.name", "python3"},
      {"host.name", "node7"},
      {"process.pid", "int:4711"},
      {"process.executable.name", "python3"},
      {"process.executable.path", "/usr/bin/python3"},
      {"process.command_args", "array:2"},
      {"process.user.id", "int:1000"},
      {"cuflight.attribution.RANK", "3"},
      {"cuflight.attribution.SLURM_JOB_ID", "4242"},
      {"container.id", "abc"},
      {"cuflight.job", "4242"},
      {"k8s.pod.uid", "u-1"},
      {"cuflight.rank", "int:3"},
      {"cuflight.world_size", "int:8"},
      {"cuflight.gpu.uuid", "GPU-00000000-1111-2222-3333-444444444444"},
      {"cuflight.gpu.pci_bus_id", "00000000:19:00.0"},
      {"cuflight.gpu.name", "H100"}};  // no cuflight.process.start_ns: start_ns 0 is unknown
  EXPECT_EQ(a, want);
}

TEST(OtlpMetrics, RenderedAsPrometheusText) {
  ExportMetrics m;
  m.Sent(10);
  m.Failed("http_500", 4);
  m.Retried("http_503");
  m.Retried("http_503");
  m.SetLag(1234, 2.5);
  std::string text;
  m.Render(&text);
  for (const char* line :
       {"cuflight_otlp_sent_records_total 10\n", "cuflight_otlp_sent_requests_total 1\n",
        "cuflight_otlp_failed_records_total{reason=\"http_500\"} 4\n",
        "cuflight_otlp_retries_total{reason=\"http_503\"} 2\n", "cuflight_otlp_lag_bytes 1234\n",
        "cuflight_otlp_lag_seconds 2.5\n", "# TYPE cuflight_otlp_lag_seconds gauge\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
}

}  // namespace
}  // namespace cuflight::exporter
