// Load: 64 producers x 100,000 events each (20,000 under ThreadSanitizer) through the
// cuflight-collector binary at once. Every event must be stored exactly once, in order, and the
// collector's peak resident set must stay bounded (it holds at most one read chunk per connection
// and the log's flush buffers).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "collector_process.h"
#include "collector_test_util.h"

namespace cuflight::collector {
namespace {

using testing::ChildProcess;
using testing::ProducerIdentity;
using testing::RawClient;
using testing::TempDir;

constexpr int kProducers = 64;
// The collector's own peak RSS bound. What it holds by design: the 256 KiB read buffer, at most
// one unfinished line per connection and the log's per-stream buffers (one loop turn's worth);
// the rest is the program and its libraries. Sanitizers add their shadow memory and quarantine,
// and ThreadSanitizer slows the collector about tenfold, so its run is shorter.
#if defined(__SANITIZE_THREAD__)
constexpr uint64_t kEvents = 20000;  // per producer, process_start and process_end included
constexpr uint64_t kMaxPeakRssBytes = 512ull << 20;
#elif defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kEvents = 100000;
constexpr uint64_t kMaxPeakRssBytes = 256ull << 20;
#else
constexpr uint64_t kEvents = 100000;
constexpr uint64_t kMaxPeakRssBytes = 96ull << 20;
#endif

// A compact kernel_time line of `id` split around its seq, so lines are made by concatenation
// (cheap next to the collector's work, which is what this test loads).
struct LineTemplate {
  std::string before_seq;
  std::string after_seq;
};

LineTemplate MakeTemplate(const ProducerIdentity& id) {
  return {R"({"type":"kernel_time","version":1,"ts_ns":1732000000,"pid":)" +
              std::to_string(id.pid) + R"(,"seq":)",
          R"(,"correlation_id":7,"device":0,"context":1,"stream":0,"start_ns":10,"end_ns":15,)"
          R"("duration_ns":5})"
          "\n"};
}

void Produce(const std::filesystem::path& socket, const ProducerIdentity& id,
             std::atomic<int>* acked) {
  RawClient client = RawClient::Unix(socket);
  ASSERT_TRUE(client.connected());
  const LineTemplate t = MakeTemplate(id);
  std::string batch = testing::ProcessStartLine(id, 0);
  char digits[24];
  for (uint64_t seq = 1; seq + 1 < kEvents; ++seq) {
    batch += t.before_seq;
    const auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), seq);
    batch.append(digits, end);
    batch += t.after_seq;
    if (batch.size() >= (64 << 10)) {
      ASSERT_TRUE(client.Send(batch));
      batch.clear();
    }
  }
  batch += testing::ProcessEndLine(id, kEvents - 1, kEvents, 0);
  ASSERT_TRUE(client.Send(batch));
  if (client.WaitAck(kEvents - 1, std::chrono::seconds(120))) ++*acked;
}

// Checks that `file` holds seqs 0..kEvents-1 in order, one per line; returns the line count.
uint64_t CheckSeqs(const std::filesystem::path& file) {
  std::string all(std::filesystem::file_size(file), '\0');
  std::ifstream(file, std::ios::binary).read(all.data(), static_cast<std::streamsize>(all.size()));
  constexpr std::string_view kKey = "\"seq\":";
  const char* p = all.data();
  const char* const end = p + all.size();
  uint64_t expected = 0;
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (nl == nullptr) {
      ADD_FAILURE() << file << ": unterminated last line";
      break;
    }
    const std::string_view line(p, static_cast<size_t>(nl - p));
    const size_t key = line.find(kKey);
    uint64_t seq = 0;
    if (key == std::string_view::npos ||
        std::from_chars(line.data() + key + kKey.size(), nl, seq).ec != std::errc()) {
      ADD_FAILURE() << file << ": line without a seq at byte " << (p - all.data());
      return expected;
    }
    if (seq != expected) {
      ADD_FAILURE() << file << ": seq " << seq << " where " << expected << " was expected";
      return expected;
    }
    ++expected;
    p = nl + 1;
  }
  return expected;
}

TEST(CollectorLoadTest, SixtyFourProducersLoseNothingAndRssStaysBounded) {
  TempDir dir;
  const auto socket = dir.path() / "run" / "c.sock";
  ChildProcess collector(CUFLIGHT_COLLECTOR_PATH,
                         {"--socket", socket.string(), "--log-dir", (dir.path() / "logs").string(),
                          "--rotate-bytes", "1G", "--log-level", "warn"},
                         dir.path() / "out.txt");
  ASSERT_TRUE(testing::WaitForSocket(socket, std::chrono::seconds(20))) << collector.Output();

  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> acked{0};
  std::vector<std::thread> producers;
  for (int i = 0; i < kProducers; ++i) {
    ProducerIdentity id;
    id.pid = static_cast<int32_t>(getpid());
    id.exe = "/srv/load" + std::to_string(i);
    id.start_ns = 5000 + i;
    producers.emplace_back(Produce, socket, id, &acked);
  }
  for (auto& t : producers) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(acked.load(), kProducers);
  const uint64_t peak_rss = testing::PeakRssBytes(collector.pid());
  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(std::chrono::seconds(60)), 0) << collector.Output();

  RecordProperty("events", std::to_string(kProducers * kEvents));
  RecordProperty("seconds", std::to_string(seconds));
  RecordProperty("collector_peak_rss_bytes", std::to_string(peak_rss));
  std::printf("%d x %llu events in %.2f s (%.0f events/s); collector peak RSS %.1f MiB\n",
              kProducers, static_cast<unsigned long long>(kEvents), seconds,
              kProducers * kEvents / seconds, peak_rss / 1048576.0);
  EXPECT_GT(peak_rss, 0u);
  EXPECT_LE(peak_rss, kMaxPeakRssBytes);

  const std::vector<std::filesystem::path> files = testing::LogFiles(dir.path() / "logs");
  ASSERT_EQ(files.size(), static_cast<size_t>(kProducers));
  uint64_t total = 0;
  for (const auto& file : files) {
    const uint64_t n = CheckSeqs(file);
    EXPECT_EQ(n, kEvents) << file;
    total += n;
  }
  EXPECT_EQ(total, kProducers * kEvents);
}

}  // namespace
}  // namespace cuflight::collector
