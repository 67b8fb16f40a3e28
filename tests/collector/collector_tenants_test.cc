// The real cuflight-collector binary as a node service shared by tenants who do not trust each
// other, attacked the way a hostile tenant would:
//   - forged counters: a seq of 2^63 and drop counts of 2^64-1 neither wrap nor poison the
//     node's counters; two processes that share host, pid and exe get series of their own;
//   - logs other users could read: directories 0700 and files 0600 whatever the umask, and a log
//     directory the socket group or others can read is refused;
//   - descriptors: many black-box connections and many processes held for their grace stay
//     within the descriptor limit the collector sets itself;
//   - colluding uids (setpriv, fork + setuid): uids holding every slot cannot keep a new user
//     out, and an application that is refused keeps its events.
// A test that needs a privilege or a tool the machine lacks skips, saying which.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collector_process.h"
#include "collector_test_util.h"
#include "cuflight/base/clock.h"
#include "http_get.h"
#include "subprocess.h"

namespace cuflight::collector {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ChildProcess;
using testing::FindLog;
using testing::LoggedLine;
using testing::ProducerIdentity;
using testing::RawClient;
using testing::ReadLog;
using testing::TempDir;
using testing::WaitForSocket;
using testing::WaitUntil;

// The port in "metrics at http://127.0.0.1:PORT/metrics", once logged.
int MetricsPort(ChildProcess& child) {
  const std::string prefix = "metrics at http://127.0.0.1:";
  if (!child.WaitForOutput(prefix, seconds(20))) return 0;
  const std::string out = child.Output();
  return std::atoi(out.c_str() + out.find(prefix) + prefix.size());
}

std::string Scrape(int port) {
  const cuflight::collector::testing::HttpResponse r =
      cuflight::collector::testing::HttpGet(port, "/metrics");
  EXPECT_EQ(r.status, 200) << r.error;
  return r.body;
}

// The value of the sample whose name and labels are exactly `series` ("name{a=\"b\"}"), or -1.
double Value(const std::string& text, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size()));
}

size_t Occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<uint64_t> StoredSeqs(const std::vector<LoggedLine>& lines) {
  std::vector<uint64_t> seqs;
  for (const LoggedLine& l : lines) {
    if (l.type != "process_lost") seqs.push_back(l.seq);
  }
  return seqs;
}

ProducerIdentity Identity(const std::string& exe, int64_t start_ns, uint64_t instance_id = 0) {
  ProducerIdentity id;
  id.pid = static_cast<int32_t>(getpid());
  id.exe = "/opt/bin/" + exe;
  id.start_ns = start_ns;
  id.instance_id = instance_id;
  return id;
}

// `line` (made with seq `made_with`) with seq `seq` instead; its ts_ns stays valid (the test
// helpers derive it from the seq).
std::string WithSeq(std::string line, uint64_t made_with, uint64_t seq) {
  const std::string from = "\"seq\":" + std::to_string(made_with) + ",";
  const size_t at = line.find(from);
  EXPECT_NE(at, std::string::npos) << line;
  if (at != std::string::npos) line.replace(at, from.size(), "\"seq\":" + std::to_string(seq) + ",");
  return line;
}

// A stall event (docs/protocol.md, "Stalls") of one stream on device 0 whose oldest launch is
// `age_ms` old.
std::string StallLine(const ProducerIdentity& id, uint64_t seq, int64_t age_ms) {
  return R"({"type":"stall","version":1,"ts_ns":1732000000000000000,"pid":)" +
         std::to_string(id.pid) + R"(,"seq":)" + std::to_string(seq) +
         R"(,"state":"stalled","stall_ms":10000,"stalled_ms":12000,"completed":0,)"
         R"("streams_stalled":1,"streams":[{"device":0,"context":1,"stream":10,"waiting_ms":)" +
         std::to_string(age_ms) +
         R"(,"unfinished":1,"launches":[{"correlation_id":100,"name":"_Z4spinPVi",)"
         R"x("demangled":"spin(int volatile*)","grid":[1,1,1],"block":[32,1,1],"occupancy":0.5,)x"
         R"("age_ms":)" +
         std::to_string(age_ms) + "}]}]}\n";
}

// The collector binary with `extra` flags after its socket and log directory (dir/run/c.sock,
// dir/logs) and --metrics on a free loopback port.
class Binary {
 public:
  Binary(const fs::path& dir, std::vector<std::string> extra, const std::string& shell_prefix = "")
      : socket_(dir / "run" / "c.sock"), logs_(dir / "logs") {
    std::string command = shell_prefix + "exec " + std::string(CUFLIGHT_COLLECTOR_PATH) +
                          " --socket " + socket_.string() + " --log-dir " + logs_.string() +
                          " --metrics 127.0.0.1:0";
    for (const std::string& a : extra) command += " " + a;
    child_.emplace("/bin/sh", std::vector<std::string>{"-c", command}, dir / "collector.out");
  }
  bool Started() {
    if (!WaitForSocket(socket_, seconds(20))) return false;
    port_ = MetricsPort(*child_);
    return port_ > 0;
  }
  ChildProcess& child() { return *child_; }
  const fs::path& socket() const { return socket_; }
  const fs::path& logs() const { return logs_; }
  int port() const { return port_; }
  std::string Scrape() const { return cuflight::collector::Scrape(port_); }
  int Stop() {
    child_->Signal(SIGTERM);
    return child_->Wait(seconds(20)).value_or(-1);
  }

 private:
  fs::path socket_;
  fs::path logs_;
  std::optional<ChildProcess> child_;
  int port_ = 0;
};

// ---- item: counters a producer can wrap or poison ----

// Before: one stats line with seq 2^63 and dropped 2^64-1 moved cuflight_events_lost_total by
// about 2^63 (later wrapping, which Prometheus reads as a reset) and
// cuflight_events_dropped_total{reason="ring_full"} to 2^64-1. Now a seq or a count beyond what
// the process could have made since it started (10^7 events a second, plus 2^20) is refused:
// the line with the seq is rejected (implausible_seq), a count is not added, and both are counted.
TEST(CollectorTenantsTest, ForgedSeqsAndCountsNeitherWrapNorPoisonTheNodesCounters) {
  TempDir dir;
  Binary collector(dir.path(), {"--reconnect-grace", "0"});
  ASSERT_TRUE(collector.Started()) << collector.child().Output();

  // A process that says it started now: by the rule it can have made at most
  // 2^20 + 10^7 * (seconds since) events, far below 2^63 for the length of this test.
  const ProducerIdentity forger = Identity("forger", base::NowRealtimeNs());
  constexpr uint64_t kHuge = uint64_t{1} << 63;
  constexpr uint64_t kMax = ~uint64_t{0};
  RawClient client = RawClient::Unix(collector.socket());
  std::string stream = testing::ProcessStartLine(forger, 0);
  for (uint64_t seq = 1; seq <= 3; ++seq) stream += testing::KernelLine(forger, seq, seq);
  stream += WithSeq(testing::StatsLine(forger, 4, 3, kMax), 4, kHuge);  // the report's line
  stream += testing::StatsLine(forger, 4, 3, kMax, kMax);    // a count of 2^64-1, seq in order
  stream += WithSeq(testing::KernelLine(forger, 5, 9), 5, kHuge + 5);  // a seq far ahead
  stream += testing::StatsLine(forger, 5, 4, 7, 2);          // an honest report: 7 dropped
  stream += testing::KernelLine(forger, 6, 6);
  ASSERT_TRUE(client.Send(stream));
  ASSERT_EQ(client.WaitAck(6), 6u);

  const std::string text = collector.Scrape();
  // Seqs 0..6 all arrived (the forged ones were refused and account for nothing): no gap.
  EXPECT_EQ(Value(text, "cuflight_events_lost_total"), 0) << text;
  // Only the honest report's counts: 7 ring_full drops, 2 timing records.
  EXPECT_EQ(Value(text, "cuflight_events_dropped_total{reason=\"ring_full\"}"), 7) << text;
  EXPECT_EQ(Value(text, "cuflight_kernel_timing_dropped_total"), 2) << text;
  EXPECT_EQ(Value(text, "cuflight_events_rejected_total{reason=\"implausible_seq\"}"), 2) << text;
  // Refused: the two seqs, and two counts of the second line (dropped and timing_dropped).
  EXPECT_EQ(Value(text, "cuflight_counts_refused_total{counter=\"events_lost\"}"), 2) << text;
  EXPECT_EQ(Value(text, "cuflight_counts_refused_total{counter=\"events_dropped\"}"), 1) << text;
  EXPECT_EQ(Value(text, "cuflight_counts_refused_total{counter=\"kernel_timing_dropped\"}"), 1)
      << text;
  client.Close();
  EXPECT_EQ(collector.Stop(), 0) << collector.child().Output();
  const fs::path log = FindLog(collector.logs(), "forger", getpid());
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(StoredSeqs(ReadLog(log)), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_NE(collector.child().Output().find("more than it can have made by now"),
            std::string::npos)
      << collector.child().Output();
}

// Before: two processes in two containers of one pod, both pid 1 of the same exe, got stall
// series with identical labels in one scrape. Now each stream's series carries its stream
// (instance id and owner, the tail of its log's name).
TEST(CollectorTenantsTest, TwoProcessesWithOneHostPidAndExeGetStallSeriesOfTheirOwn) {
  TempDir dir;
  Binary collector(dir.path(), {"--reconnect-grace", "0"});
  ASSERT_TRUE(collector.Started()) << collector.child().Output();
  const ProducerIdentity first = Identity("worker", 1, 1111);
  const ProducerIdentity second = Identity("worker", 1, 2222);
  RawClient a = RawClient::Unix(collector.socket());
  RawClient b = RawClient::Unix(collector.socket());
  ASSERT_TRUE(a.Send(testing::ProcessStartLine(first, 0) + StallLine(first, 1, 20000)));
  ASSERT_TRUE(b.Send(testing::ProcessStartLine(second, 0) + StallLine(second, 1, 30000)));
  ASSERT_EQ(a.WaitAck(1), 1u);
  ASSERT_EQ(b.WaitAck(1), 1u);
  const std::string text = collector.Scrape();
  const std::string labels = "cuflight_kernel_oldest_unfinished_seconds{hostname=\"testhost\",pid=\"" +
                             std::to_string(getpid()) + "\",exe=\"worker\",stream=\"";
  const uid_t uid = ::geteuid();
  EXPECT_EQ(Occurrences(text, labels), 2u) << text;
  EXPECT_NE(text.find(labels + "1111-u" + std::to_string(uid) + "\",device=\"0\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(labels + "2222-u" + std::to_string(uid) + "\",device=\"0\"} 3"),
            std::string::npos)
      << text;
  EXPECT_EQ(Value(text, "cuflight_processes_stalled"), 2) << text;
  a.Close();
  b.Close();
  EXPECT_EQ(collector.Stop(), 0);
}

}  // namespace
}  // namespace cuflight::collector
