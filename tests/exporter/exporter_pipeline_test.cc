// The OTLP export end to end: the real cuflight-collector binary with --otlp-endpoint, eight
// producers of job 4242 (the fake application under the real injected library, RANK=0..7; two
// crash, one kills itself), and a receiver of the test's own that decodes every request with
// protoc's classes and fails (503 with Retry-After, 429, 500), stalls past the client's timeout,
// stops and restarts; meanwhile the collector is killed (SIGKILL) and restarted.
//
// What must hold (docs/fleet.md, "Export to an OpenTelemetry pipeline"):
//  - every event of an exported type in the local logs arrives, keyed (stream, seq, type), except
//    the records of the one request answered 500, which the OTLP specification says not to send
//    again (docs/specification.md, "Retryable Response Codes") and which the receiver decoded
//    all the same;
//  - every Resource names the host, the pid, job 4242, the rank and the GPU's UUID as the fake
//    driver's cuDeviceGetUuid_v2 gives it (FAKE_CUDA_UUID);
//  - the crashed and the killed ranks' last launches arrive, the last of them the last kernel
//    of the local log, and the roll-ups count every launch;
//  - after a clean stop nothing is sent again.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "collector_process.h"
#include "cuflight/logread/log_reader.h"
#include "cuflight/schema/log_layout.h"
#include "otlp_receiver.h"
#include "subprocess.h"
#include "temp_dir.h"
#include "wait_until.h"

namespace cuflight::exporter::testing {
namespace {

using collector::testing::ChildProcess;
using collector::testing::WaitForSocket;
using test_support::TempDir;
using Key = std::tuple<std::string, uint64_t, std::string>;  // stream, seq, event_name

constexpr std::chrono::seconds kStart{20};

// The stream a log file belongs to (segment_names.h: the name without .jsonl, .<N>.jsonl,
// .<N>.jsonl.zst).
std::string StreamOf(const std::filesystem::path& file) {
  return schema::ParseLogFileName(file.filename().string()).base;
}

struct LocalLog {
  std::set<Key> exported;                        // events of the types exported by default
  std::map<std::string, std::vector<uint64_t>> kernel_seqs;  // per stream, in order
  std::map<std::string, std::string> end_type;   // per stream: its last end event
};

LocalLog ReadLocal(const std::filesystem::path& logs) {
  LocalLog out;
  std::vector<std::filesystem::path> files;
  std::string error;
  EXPECT_TRUE(logread::ExpandLogPaths({logs.string()}, &files, &error)) << error;
  logread::ReadSummary summary;
  logread::ReadOptions options;
  options.sequential = true;
  EXPECT_TRUE(logread::ReadLogFiles(
      files,
      [&](const schema::OwnedEvent& e, const logread::Origin& origin) {
        const std::string stream = StreamOf(*origin.file);
        const std::string type(schema::EventTypeName(schema::TypeOf(e)));
        const uint64_t seq = schema::HeaderOf(e).seq;
        if (type == "kernel") out.kernel_seqs[stream].push_back(seq);
        if (type == "process_end" || type == "process_crash" || type == "process_lost") {
          if (out.end_type[stream] != "process_crash") out.end_type[stream] = type;
        }
        if (type != "kernel" && type != "kernel_time" && type != "stats") {
          out.exported.emplace(stream, seq, "cuflight." + type);
        }
      },
      options, &summary, &error))
      << error;
  return out;
}

std::vector<std::string> CollectorArgs(const TempDir& dir, const OtlpReceiver& rx) {
  return {"--socket", (dir.path() / "run" / "c.sock").string(),
          "--log-dir", (dir.path() / "logs").string(),
          "--otlp-endpoint", rx.endpoint(),
          "--otlp-timeout", "400",
          "--otlp-retry-initial", "50",
          "--otlp-retry-max", "400",
          "--otlp-scan-interval", "50",
          "--otlp-rollup-interval", "200",
          "--otlp-batch-records", "24",
          "--otlp-headers", "X-Scope-OrgID=gpu%20fleet",
          "--reconnect-grace", "100"};
}

// Rank r's GPU: FAKE_CUDA_UUID's 32 hex digits, and the UUID as nvidia-smi prints those 16
// bytes (8-4-4-4-12 lower-case hex digits after "GPU-").
std::string FakeUuidHex(int rank) { return "4242000000000000000000000000000" + std::to_string(rank); }
std::string ExpectedUuid(int rank) {
  return "GPU-42420000-0000-0000-0000-00000000000" + std::to_string(rank);
}

const char* ModeOf(int rank) {
  switch (rank) {
    case 2:
      return "segv";
    case 5:
      return "abrt";
    case 6:
      return "stream-kill";  // launches for 300 ms, then SIGKILL
    default:
      return "";
  }
}

TEST(OtlpExport, EightRanksArriveThroughFailuresStallsAndRestarts) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "run");
  OtlpReceiver rx;
  rx.Script({{503, "1", {}}, {429, "", {}}, {500, "", {}}, {200, "", std::chrono::milliseconds(1200)}});
  const std::filesystem::path socket = dir.path() / "run" / "c.sock";
  auto collector = std::make_unique<ChildProcess>(CUFLIGHT_COLLECTOR_PATH,
                                                  CollectorArgs(dir, rx), dir.path() / "out.txt");
  ASSERT_TRUE(WaitForSocket(socket, kStart)) << collector->Output();

  setenv("CUFLIGHT_COLLECTOR", socket.c_str(), 1);
  setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
  setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
  setenv("SLURM_JOB_ID", "4242", 1);
  std::map<int, int> pid_of_rank;
  for (int rank = 0; rank < 8; ++rank) {
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("FAKE_CUDA_UUID", FakeUuidHex(rank).c_str(), 1);
    const auto r = cuflight::testing::RunProcess(CUFLIGHT_FAKE_APP,
                                                 {CUFLIGHT_INJECT_SO, "40", ModeOf(rank)});
    if (rank == 3) rx.Stop();  // the receiver goes away while ranks 4..6 run
    if (rank == 6) {
      // The collector dies with a backlog it could not send, and comes back (once it has written
      // the killed rank's process_lost).
      EXPECT_TRUE(test_support::WaitUntil(
          [&] { return ReadLocal(dir.path() / "logs").end_type.size() == 7; },
          std::chrono::seconds(20), std::chrono::milliseconds(100)))
          << [&] {
               std::string ends;
               for (const auto& [stream, type] : ReadLocal(dir.path() / "logs").end_type) {
                 ends += stream + " " + type + "\n";
               }
               return ends;
             }() << collector->Output();
      collector->Signal(SIGKILL);
      collector->Wait(std::chrono::seconds(10));
      collector = std::make_unique<ChildProcess>(CUFLIGHT_COLLECTOR_PATH, CollectorArgs(dir, rx),
                                                 dir.path() / "out2.txt");
      ASSERT_TRUE(WaitForSocket(socket, kStart)) << collector->Output();
      rx.Restart();
    }
    static_cast<void>(r);
  }
  for (const char* v : {"CUFLIGHT_COLLECTOR", "SLURM_JOB_ID", "RANK", "FAKE_CUDA_UUID"}) {
    unsetenv(v);
  }

  // Everything the local logs hold of the exported types arrives, or was refused with 500.
  LocalLog local;
  const auto arrived = [&] {
    local = ReadLocal(dir.path() / "logs");
    std::set<Key> got;
    for (const auto& r : rx.Accepted()) got.emplace(r.stream(), r.seq(), r.event_name);
    for (const auto& r : rx.Refused()) got.emplace(r.stream(), r.seq(), r.event_name);
    if (local.end_type.size() < 8) return false;
    for (const Key& k : local.exported) {
      if (got.count(k) == 0) return false;
    }
    return true;
  };
  EXPECT_TRUE(test_support::WaitUntil(arrived, std::chrono::seconds(60), std::chrono::milliseconds(250)))
      << collector->Output();
  EXPECT_TRUE(rx.Undecodable().empty()) << rx.Undecodable().front();
  // The 503, the 429, the 500 and the stall were all answered, and what was refused with a
  // retryable status came again.
  EXPECT_GE(rx.requests(), 5);
  EXPECT_EQ(local.end_type.size(), 8u);

  std::set<Key> accepted;
  for (const auto& r : rx.Accepted()) accepted.emplace(r.stream(), r.seq(), r.event_name);
  std::set<Key> refused;
  for (const auto& r : rx.Refused()) refused.emplace(r.stream(), r.seq(), r.event_name);
  EXPECT_FALSE(refused.empty()) << "the 500 was never answered";
  for (const Key& k : local.exported) {
    EXPECT_TRUE(accepted.count(k) > 0 || refused.count(k) > 0)
        << std::get<0>(k) << " seq " << std::get<1>(k) << " " << std::get<2>(k);
  }

  // What the receiver decoded, accepted or refused with the 500: the checks below hold for
  // every request the exporter made.
  std::vector<ReceivedRecord> all = rx.Accepted();
  for (const auto& r : rx.Refused()) all.push_back(r);

  // Every Resource: host, pid, job, rank, the rank's GPU; one pid per rank.
  std::map<std::string, std::string> rank_of_stream;
  for (const auto& r : all) {
    ASSERT_EQ(r.resource.count("host.name"), 1u) << r.stream();
    EXPECT_FALSE(r.resource.at("host.name").empty());
    ASSERT_EQ(r.resource.count("process.pid"), 1u);
    EXPECT_EQ(r.resource.count("cuflight.job") ? r.resource.at("cuflight.job") : "", "4242");
    ASSERT_EQ(r.resource.count("cuflight.rank"), 1u) << r.stream();
    const int rank = std::stoi(r.resource.at("cuflight.rank"));
    ASSERT_GE(rank, 0);
    ASSERT_LT(rank, 8);
    EXPECT_EQ(r.resource.count("cuflight.gpu.uuid") ? r.resource.at("cuflight.gpu.uuid") : "",
              ExpectedUuid(rank))
        << r.event_name;
    EXPECT_EQ(r.resource.at("cuflight.stream"), r.stream());
    EXPECT_EQ(r.resource.at("cuflight.attribution.SLURM_JOB_ID"), "4242");
    rank_of_stream[r.stream()] = r.resource.at("cuflight.rank");
  }
  EXPECT_EQ(rank_of_stream.size(), 8u);
  // The header the flag named, percent-decoded.
  EXPECT_EQ(rx.last_headers()["X-Scope-OrgID"], "gpu fleet");

  // The last launches of the crashed (2, 5) and killed (6) ranks: up to 16, ending with the last
  // kernel of the local log; none for the ranks that ended normally.
  std::map<std::string, std::set<uint64_t>> last_launches;
  std::map<std::string, std::set<std::string>> triggers;
  for (const auto& r : all) {
    const auto t = r.attributes.find("cuflight.last_launch.trigger");
    if (t == r.attributes.end()) continue;
    EXPECT_EQ(r.event_name, "cuflight.kernel");
    last_launches[r.stream()].insert(r.seq());
    triggers[r.stream()].insert(t->second);
  }
  for (const auto& [stream, rank] : rank_of_stream) {
    const std::vector<uint64_t>& kernels = local.kernel_seqs[stream];
    if (rank == "2" || rank == "5" || rank == "6") {
      ASSERT_FALSE(kernels.empty()) << stream;
      const std::set<uint64_t> want(kernels.end() - std::min<size_t>(16, kernels.size()),
                                    kernels.end());
      EXPECT_EQ(last_launches[stream], want) << "rank " << rank;
      EXPECT_EQ(*triggers[stream].begin(),
                rank == "6" ? std::string("process_lost") : std::string("process_crash"));
    } else {
      EXPECT_TRUE(last_launches[stream].empty()) << "rank " << rank;
    }
  }

  // Roll-ups: one record per (window's first launch, kernel, limiter), the same after a
  // restart; together they count every launch of the local log.
  std::map<std::tuple<std::string, uint64_t, std::string, std::string>, uint64_t> rollups;
  for (const auto& r : all) {
    if (r.event_name != "cuflight.kernel_rollup") continue;
    rollups[{r.stream(), r.seq(), r.attributes.at("cuflight.kernel.name"),
             r.attributes.at("cuflight.kernel.limiter")}] =
        std::stoull(r.attributes.at("cuflight.rollup.launches"));
  }
  std::map<std::string, uint64_t> launches;
  for (const auto& [k, n] : rollups) launches[std::get<0>(k)] += n;
  for (const auto& [stream, rank] : rank_of_stream) {
    EXPECT_EQ(launches[stream], local.kernel_seqs[stream].size()) << "rank " << rank;
  }

  // A clean stop, then a start: nothing is sent again.
  collector->Signal(SIGTERM);
  EXPECT_EQ(collector->Wait(std::chrono::seconds(20)), 0) << collector->Output();
  const size_t before = rx.Accepted().size() + rx.Refused().size();
  collector = std::make_unique<ChildProcess>(CUFLIGHT_COLLECTOR_PATH, CollectorArgs(dir, rx),
                                             dir.path() / "out3.txt");
  ASSERT_TRUE(WaitForSocket(socket, kStart)) << collector->Output();
  ASSERT_TRUE(collector->WaitForOutput("exporting events", kStart));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(rx.Accepted().size() + rx.Refused().size(), before);
}

// http/json, a bearer token from a file, and the exporter's series on /metrics: one producer's
// events arrive as JSON the receiver decodes with protoc's JSON parser, each request carrying the
// token the file holds when it is sent.
TEST(OtlpExport, JsonWithABearerTokenAndTheExportersMetrics) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "run");
  OtlpReceiver rx;
  rx.Script({{503, "", {}}});
  const std::filesystem::path token = dir.path() / "token";
  std::ofstream(token) << "s3cret\n";
  std::vector<std::string> args = CollectorArgs(dir, rx);
  for (const char* a : {"--otlp-protocol", "http/json", "--metrics", "127.0.0.1:0"}) {
    args.emplace_back(a);
  }
  args.insert(args.end(), {"--otlp-bearer-token-file", token.string()});
  ChildProcess collector(CUFLIGHT_COLLECTOR_PATH, args, dir.path() / "out.txt");
  const std::filesystem::path socket = dir.path() / "run" / "c.sock";
  ASSERT_TRUE(WaitForSocket(socket, kStart)) << collector.Output();
  ASSERT_TRUE(collector.WaitForOutput("/metrics", kStart)) << collector.Output();
  const std::string out = collector.Output();
  const size_t at = out.find("metrics at http://127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << out;
  const int port = std::stoi(out.substr(at + 28));

  setenv("CUFLIGHT_COLLECTOR", socket.c_str(), 1);
  setenv("LD_LIBRARY_PATH", CUFLIGHT_FAKE_LIBCUDA_DIR, 1);
  setenv("CUFLIGHT_CUPTI_PATH", CUFLIGHT_FAKE_LIBCUPTI, 1);
  const auto r = cuflight::testing::RunProcess(CUFLIGHT_FAKE_APP, {CUFLIGHT_INJECT_SO, "5"});
  unsetenv("CUFLIGHT_COLLECTOR");
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // process_start, device, process_end and one roll-up of the five launches.
  const auto types = [&] {
    std::set<std::string> t;
    for (const auto& rec : rx.Accepted()) t.insert(rec.event_name);
    return t;
  };
  ASSERT_TRUE(test_support::WaitUntil(
      [&] { return types().count("cuflight.kernel_rollup") > 0 &&
                   types().count("cuflight.process_end") > 0; },
      std::chrono::seconds(20), std::chrono::milliseconds(50)))
      << collector.Output();
  EXPECT_TRUE(rx.Undecodable().empty()) << rx.Undecodable().front();
  EXPECT_EQ(rx.last_headers()["Content-Type"], "application/json");
  EXPECT_EQ(rx.last_headers()["Authorization"], "Bearer s3cret");
  for (const auto& rec : rx.Accepted()) {
    if (rec.event_name != "cuflight.kernel_rollup") continue;
    EXPECT_EQ(rec.attributes.at("cuflight.rollup.launches"), "5");
  }

  // The receiver holds a request's records before its answer reaches the exporter, which counts
  // them only then: scrape until the counters have caught up with what the receiver accepted.
  httplib::Client http("127.0.0.1", port);
  std::string text;
  const std::string sent =
      "cuflight_otlp_sent_records_total " + std::to_string(rx.Accepted().size()) + "\n";
  test_support::WaitUntil(
      [&] {
        const httplib::Result res = http.Get("/metrics");
        text = res ? res->body : "";
        return text.find(sent) != std::string::npos &&
               text.find("cuflight_otlp_lag_bytes 0\n") != std::string::npos;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(50));
  ASSERT_FALSE(text.empty()) << "no answer from /metrics";
  EXPECT_NE(text.find("cuflight_otlp_retries_total{reason=\"http_503\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find(sent), std::string::npos) << text;
  EXPECT_NE(text.find("cuflight_otlp_lag_bytes 0\n"), std::string::npos) << text;
}

// A bad export flag: exit 2 and one line naming it, before anything starts.
TEST(OtlpExport, ABadEndpointIsAUsageError) {
  const auto r = cuflight::testing::RunProcess(CUFLIGHT_COLLECTOR_PATH,
                                               {"--otlp-endpoint", "otel-collector:4318"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("cuflight-collector: --otlp-endpoint: 'otel-collector:4318' is not an "
                        "http:// or https:// URL",
                        0),
            0u)
      << r.err;
  const auto tls = cuflight::testing::RunProcess(
      CUFLIGHT_COLLECTOR_PATH,
      {"--otlp-endpoint", "http://otel:4318", "--otlp-ca-file", "/etc/hostname"});
  EXPECT_EQ(tls.exit_code, 2);
  EXPECT_NE(tls.err.find("need an https:// endpoint"), std::string::npos) << tls.err;
}

// A hostile or broken environment and cursor, through the binary: a header that would inject
// another, or the request's own framing, stops the collector before anything starts (exit 2, one
// line naming the variable, nothing of the value but its first 64 printable bytes); a cursor that
// is a symbolic link stops it once its log directory is open (exit 1, one line), its target
// untouched.
TEST(OtlpExport, AHostileEnvironmentOrCursorIsOneLine) {
  TempDir dir;
  OtlpReceiver rx;
  const std::vector<std::string> args = {"--socket", (dir.path() / "run" / "c.sock").string(),
                                         "--log-dir", (dir.path() / "logs").string()};
  const std::vector<std::pair<const char*, std::string>> env = {
      {"OTEL_EXPORTER_OTLP_HEADERS", "k=v%0D%0AX-Injected:%201"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "Transfer-Encoding=chunked"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "k=" + std::string(100000, 'a')},
      {"OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint() + "/\x1b[2J"},
  };
  for (const auto& [name, value] : env) {
    ASSERT_EQ(setenv(name, value.c_str(), 1), 0);
    ASSERT_EQ(setenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", (rx.endpoint() + "/v1/logs").c_str(), 1),
              0);
    if (std::string_view(name) == "OTEL_EXPORTER_OTLP_ENDPOINT") {
      unsetenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT");
    }
    const auto r = cuflight::testing::RunProcess(CUFLIGHT_COLLECTOR_PATH, args);
    unsetenv(name);
    unsetenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT");
    EXPECT_EQ(r.exit_code, 2) << name << ": " << r.err.substr(0, 300);
    EXPECT_EQ(r.err.rfind(std::string("cuflight-collector: ") + name + ": ", 0), 0u)
        << r.err.substr(0, 300);
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err.substr(0, 300);
    EXPECT_LT(r.err.size(), 400u);
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  }
  EXPECT_EQ(rx.requests(), 0);

  const auto target = dir.path() / "elsewhere.json";
  std::ofstream(target) << R"({"version":1,"streams":{}})";
  const auto cursor = dir.path() / "otlp-cursor.json";
  std::filesystem::create_symlink(target, cursor);
  std::vector<std::string> with_cursor = args;
  for (const char* a : {"--otlp-endpoint", "", "--otlp-cursor", ""}) with_cursor.push_back(a);
  with_cursor[with_cursor.size() - 3] = rx.endpoint();
  with_cursor.back() = cursor.string();
  const auto r = cuflight::testing::RunProcess(CUFLIGHT_COLLECTOR_PATH, with_cursor);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cuflight-collector: --otlp-endpoint: the cursor " + cursor.string() +
                       " is a symbolic link: not followed"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(cursor));
  std::ifstream in(target);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, R"({"version":1,"streams":{}})");
}

}  // namespace
}  // namespace cuflight::exporter::testing
