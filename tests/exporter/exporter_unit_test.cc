// The exporter's parts on their own: the OTLP retry rules, the option texts, the cursor file,
// the segment reader over plain and zstd files, and the Resource made of a process_start.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cuflight/exporter/exporter.h"
#include "cursor.h"
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

// What a broken environment or a hostile value gives OTEL_EXPORTER_OTLP_ENDPOINT (or
// --otlp-endpoint): refused in one line of printable ASCII, never a URL the HTTP client would
// mangle or throw on. A URL is printable ASCII (RFC 3986 2.1: other bytes percent-encoded); a
// port is 1 to 65535 (RFC 3986 3.2.3, a TCP port number).
TEST(OtlpOptions, HostileEndpointsAreRefusedInOneLine) {
  std::string e, why;
  const std::string long_path = "http://otel:4318/" + std::string(5000, 'a');
  const std::vector<std::string> bad = {
      long_path,
      std::string("http://otel:4318/v1/logs\r\nX-Injected: 1"),
      std::string("http://otel:4318/v1/\x01logs"),
      std::string("http://otel:4318/v1/\x7flogs"),
      std::string("http://ot\xffl:4318/v1/logs"),      // not ASCII (nor UTF-8)
      std::string("http://\xc3\xb6tel:4318/v1/logs"),  // UTF-8, not ASCII: punycode it
      std::string("http://otel:4318/v1/logs\0x", 26),  // a NUL inside
      "http://otel:99999999999/v1/logs",  // beyond int: std::stoi in the HTTP client throws
      "http://otel:65536",
      "http://otel:0",
      "http://otel:",
      "http://otel:43a8",
      "http://:4318",
      "http://[::1",
      "http://[::1]x:4318",
  };
  for (const std::string& text : bad) {
    why.clear();
    EXPECT_FALSE(ParseEndpoint(text, &e, &why)) << text;
    EXPECT_FALSE(why.empty()) << text;
    EXPECT_LE(why.size(), 200u) << why;  // the value is cut, not echoed whole
    for (char c : why) {
      EXPECT_TRUE(c >= 0x20 && c < 0x7f)
          << "byte " << int(static_cast<unsigned char>(c)) << " in: " << why;
    }
  }
  ASSERT_TRUE(ParseEndpoint("http://otel:65535", &e, &why)) << why;
  EXPECT_EQ(e, "http://otel:65535/v1/logs");
  ASSERT_TRUE(ParseEndpoint("http://[fe80::1]:4318/a%20b", &e, &why)) << why;
  EXPECT_EQ(e, "http://[fe80::1]:4318/a%20b");
  ASSERT_TRUE(ParseEndpoint("https://otel.example", &e, &why)) << why;  // the scheme's port
}

// OTEL_EXPORTER_OTLP_HEADERS takes W3C Baggage's format (specification/protocol/exporter.md,
// "Specifying headers via environment variables"), so W3C Baggage's limits (8192 bytes, 180
// list-members); each decoded value must be an HTTP field value (RFC 9110 5.5: no control
// character but HTAB), and a header the HTTP client writes from the request itself (its framing,
// target, connection and body type, RFC 9112 6 and RFC 9110 7.6.1) cannot be given: a
// Content-Length that is not the body's would split a kept-alive connection's requests
// differently at the receiver. A key given twice (letter case aside, RFC 9110 5.1) is refused
// rather than one of them silently kept.
TEST(OtlpOptions, HostileHeadersAreRefusedInOneLine) {
  std::vector<std::pair<std::string, std::string>> h;
  std::string why;
  std::string many;
  for (int i = 0; i < 181; ++i) many += "k" + std::to_string(i) + "=v,";
  ASSERT_LE(many.size(), 8192u);
  const std::vector<std::string> bad = {
      "api-key=" + std::string(9000, 'a'),  // longer than 8192 bytes
      many,                                 // 181 headers
      std::string("k=v\r\nX-Injected: 1"),  // raw CR LF
      "k=v%0D%0AX-Injected:%201",           // encoded CR LF
      "k=a%0Ab",                            // LF alone
      "k=a%00b",                            // NUL
      "k=a%01b",                            // another control character
      "k=a%7Fb",                            // DEL
      std::string("k=a\x01"
                  "b"),    // raw control character
      "Content-Length=0",  // the request's framing
      "transfer-encoding=chunked",
      "Host=internal.example",
      "Content-Type=text%2Fplain",
      "Content-Encoding=gzip",
      "Connection=close",
      "Expect=100-continue",
      "X-Tenant=a,x-tenant=b",  // twice
      "=v",                     // no key
      "k",                      // no '='
      "k=%zz",                  // not percent-encoding
      std::string("k\xff=v"),   // key not a token
  };
  for (const std::string& text : bad) {
    why.clear();
    EXPECT_FALSE(ParseHeaders(text, &h, &why)) << text.substr(0, 80);
    EXPECT_FALSE(why.empty());
    EXPECT_LE(why.size(), 200u) << why;
    for (char c : why) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << why;
  }
  // 180 headers, a tab, and bytes above 0x7f (obs-text, RFC 9110 5.5) pass, as given.
  std::string most;
  for (int i = 0; i < 180; ++i) most += "k" + std::to_string(i) + "=v,";
  ASSERT_TRUE(ParseHeaders(most, &h, &why)) << why;
  EXPECT_EQ(h.size(), 180u);
  ASSERT_TRUE(ParseHeaders("X-A=a%09b,X-B=%FF%C3%B6", &h, &why)) << why;
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].second, "a\tb");
  EXPECT_EQ(h[1].second, "\xff\xc3\xb6");
  // A bearer token file and an Authorization header would send two: one of them, please.
  ExportOptions o;
  o.endpoint = "http://otel:4318/v1/logs";
  o.bearer_token_file = "/etc/hostname";
  ASSERT_TRUE(ParseHeaders("authorization=Basic%20YTpi", &o.headers, &why)) << why;
  EXPECT_FALSE(CheckOptions(o, &why));
  EXPECT_NE(why.find("Authorization"), std::string::npos) << why;
  o.bearer_token_file.clear();
  EXPECT_TRUE(CheckOptions(o, &why)) << why;
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

// The cursor file as a hostile neighbour or a broken disk leaves it (exporter.h, design note 2,
// cursor.h): each is refused with one line naming the file, nothing followed, waited on or read
// beyond the bound; Exporter::Start then fails with that line (the collector exits with it)
// rather than export from a position the collector did not save.
class OtlpCursorFile : public ::testing::Test {
 protected:
  std::filesystem::path file() const { return dir_.path() / "cursor.json"; }
  void Write(const std::string& text) const {
    std::ofstream(file(), std::ios::binary | std::ios::trunc) << text;
    std::filesystem::permissions(
        file(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  // LoadCursor's answer: "" when it loaded, else its error, which must be one line.
  std::string Load() const {
    Cursor c;
    std::string error;
    if (LoadCursor(file(), &c, &error)) return "";
    EXPECT_FALSE(error.empty());
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_NE(error.find(file().string()), std::string::npos) << error;
    return error;
  }
  TempDir dir_;
  const std::string valid_ =
      R"({"version":1,"streams":{"2026-11-28/a-b-1-2":{"segment":3,"offset":4096}}})";
};

TEST_F(OtlpCursorFile, TruncatedOrGarbageOrMistypedIsNotACursor) {
  const std::vector<std::string> bad = {
      valid_.substr(0, valid_.size() / 2),                                        // truncated
      "",                                                                         // empty
      std::string("\x00\xff\xfe garbage \x01", 13),                               // binary
      "{\"version\":1,\"streams\":{\"k\":{\"segment\":\"\xff\",\"offset\":0}}}",  // not UTF-8
      R"({"version":2,"streams":{}})",
      R"({"version":1,"streams":[]})",
      R"({"version":1,"streams":{"k":{"segment":-1,"offset":0}}})",  // before the start
      R"({"version":1,"streams":{"k":{"segment":1,"offset":-5}}})",
      R"({"version":1,"streams":{"k":{"segment":1.5,"offset":0}}})",
      R"({"version":1,"streams":{"k":{"segment":1,"offset":18446744073709551616}}})",  // 2^64
      R"({"version":1,"streams":{"k":{"segment":1,"offset":0,"finished":"yes"}}})",
      R"({"version":1,"streams":{"k\u0000\n":{"segment":1,"offset":0,"finished":1}}})",
  };
  for (const std::string& text : bad) {
    Write(text);
    EXPECT_NE(Load().find("is not an exporter cursor"), std::string::npos) << text;
  }
  Write(valid_);
  EXPECT_EQ(Load(), "");
}

TEST_F(OtlpCursorFile, ASymbolicLinkIsNotFollowed) {
  const auto elsewhere = dir_.path() / "elsewhere.json";
  std::ofstream(elsewhere) << valid_;  // a valid cursor: only the link is wrong
  std::filesystem::create_symlink(elsewhere, file());
  EXPECT_NE(Load().find("is a symbolic link"), std::string::npos);
  std::filesystem::remove(file());
  std::filesystem::create_symlink("/dev/zero", file());  // endless, were it followed
  EXPECT_NE(Load().find("is a symbolic link"), std::string::npos);
  // Saving replaces the link with a file of its own, and leaves what it named alone.
  Cursor c;
  c["2026-11-28/c-d-5-6"] = {{1, 0}, true};
  std::string error;
  ASSERT_TRUE(SaveCursor(file(), c, &error)) << error;
  EXPECT_FALSE(std::filesystem::is_symlink(file()));
  EXPECT_EQ(Load(), "");
}

TEST_F(OtlpCursorFile, AFifoOrADirectoryIsNotReadAndNotWaitedOn) {
  ASSERT_EQ(::mkfifo(file().c_str(), 0600), 0);  // no writer: a blocking open would wait forever
  EXPECT_NE(Load().find("is not a regular file"), std::string::npos);
  std::filesystem::remove(file());
  std::filesystem::create_directory(file());
  EXPECT_NE(Load().find("is not a regular file"), std::string::npos);
}

TEST_F(OtlpCursorFile, AHugeFileIsNotRead) {
  {
    std::ofstream out(file());
    out << valid_;
  }
  // Sparse: kMaxCursorBytes + 1 bytes that cost no disk.
  std::filesystem::resize_file(file(), kMaxCursorBytes + 1);
  ASSERT_EQ(::chmod(file().c_str(), 0600), 0);  // whatever the umask: only its size is wrong
  const std::string error = Load();
  EXPECT_NE(error.find("more than a cursor's 67108864"), std::string::npos) << error;
}

TEST_F(OtlpCursorFile, AnotherUsersOrAWritableFileIsRefused) {
  Write(valid_);
  ASSERT_EQ(::chmod(file().c_str(), 0666), 0);
  EXPECT_NE(Load().find("writable by every user"), std::string::npos);
  ASSERT_EQ(::chmod(file().c_str(), 0660), 0);  // a group of its own (umask 002) is the owner's
  EXPECT_EQ(Load(), "");
  if (::geteuid() != 0) GTEST_SKIP() << "giving the file to another uid needs root";
  ASSERT_EQ(::chown(file().c_str(), 12345, 12345), 0);
  EXPECT_NE(Load().find("is owned by uid 12345"), std::string::npos);
}

// What is at the temporary name (a crash's leftover, a link, a FIFO) is replaced, never written
// through or waited on.
TEST_F(OtlpCursorFile, SavingNeverWritesThroughTheTemporaryName) {
  const auto tmp = std::filesystem::path(file().string() + ".tmp");
  const auto victim = dir_.path() / "victim";
  std::ofstream(victim) << "untouched";
  std::filesystem::create_symlink(victim, tmp);
  Cursor c;
  c["2026-11-28/a-b-1-2"] = {{2, 10}, false};
  std::string error;
  ASSERT_TRUE(SaveCursor(file(), c, &error)) << error;
  std::ifstream in(victim);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, "untouched");
  ASSERT_EQ(::mkfifo(tmp.c_str(), 0600), 0);
  ASSERT_TRUE(SaveCursor(file(), c, &error)) << error;
  Cursor back;
  ASSERT_TRUE(LoadCursor(file(), &back, &error)) << error;
  EXPECT_EQ(back, c);
  EXPECT_FALSE(std::filesystem::exists(tmp));
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

// OTEL_RESOURCE_ATTRIBUTES (and OTEL_SERVICE_NAME) describe the process whose environment holds
// them (specification/resource/sdk.md, "Specifying resource information via an environment
// variable"); the exporter's Resource is the producing process, from its own events, so neither
// the collector's value nor a tenant's is parsed into it. A tenant that carries its own value
// (CUFLIGHT_ATTRIBUTION_ENV=OTEL_RESOURCE_ATTRIBUTES, docs/fleet.md "Attribution") gets one
// string attribute under its variable's name, never a service.name, host.name or k8s.* of its
// choosing.
TEST(OtlpRecords, OtelResourceAttributesNeverNameTheResource) {
  ASSERT_EQ(setenv("OTEL_RESOURCE_ATTRIBUTES",
                   "service.name=collector-env,k8s.namespace.name=kube-system", 1),
            0);
  ASSERT_EQ(setenv("OTEL_SERVICE_NAME", "collector-env", 1), 0);
  const std::string hostile =
      "service.name=victim,host.name=other%2Chost,k8s.pod.uid=u-9,\x01\xff,=,novalue";
  StreamIdentity id;
  id.stream = "node7-python3-4711-1700000000000000000";
  schema::OwnedProcessStartEvent s;
  s.header = {1700000000000000000, 4711, 0};
  s.exe = "/usr/bin/python3";
  s.argv = {"python3"};
  s.hostname = "node7";
  s.attribution = {{"OTEL_RESOURCE_ATTRIBUTES", hostile}};
  id.start = s;
  opentelemetry::proto::resource::v1::Resource r;
  FillResource(id, &r);
  unsetenv("OTEL_RESOURCE_ATTRIBUTES");
  unsetenv("OTEL_SERVICE_NAME");
  std::map<std::string, std::string> a;
  for (const auto& kv : r.attributes()) {
    if (kv.value().has_string_value()) a[kv.key()] = kv.value().string_value();
  }
  EXPECT_EQ(a["service.name"], "python3");
  EXPECT_EQ(a["host.name"], "node7");
  EXPECT_EQ(a.count("k8s.namespace.name"), 0u);
  EXPECT_EQ(a.count("k8s.pod.uid"), 0u);
  EXPECT_EQ(a["cuflight.attribution.OTEL_RESOURCE_ATTRIBUTES"], hostile);
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
