// What reading a dead producer's black box may cost the cuflight-collector binary, attacked as a
// hostile producer would and loaded as a scheduler killing a job's ranks together would:
//   - sparse black boxes: a 64 MiB memfd of which only a few pages were written, whose header
//     claims every ring slot in use and its whole 62 MiB names area committed. Mapping and
//     reading what it claims made the kernel allocate every page it touched and charge it to the
//     collector's memory cgroup (for as long as a sibling of the producer keeps the memfd), and
//     the names area was copied whole: a 200 MiB cgroup was OOM-killed at the third box. Now
//     the collector reads only what was written: its cgroup (one this test makes) grows by a
//     small bound over five such boxes, and a real black box still recovers fully beside them;
//   - six producers with full rings killed at once beside a live producer: the live producer's
//     acks stay prompt while the six are read, and every launch in the six rings is stored;
//   - a forged black box whose every record names a 30,000-character name: what one box gives
//     stops at 128 MiB of lines, the rest counted lost, and the live producer's acks stay prompt
//     (the inline reader took 2.7 s before acking it, and stored 250 MB);
//   - a collector stopped while it reads a black box finishes the reading first.
// CUFLIGHT_TEST_COLLECTOR names another collector binary to run these against.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "blackbox_producer.h"
#include "collector_process.h"
#include "collector_test_util.h"
#include "cuflight/blackbox/region_layout.h"
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/inject/ring.h"
#include "cuflight/occupancy/device_presets.h"
#include "memory_cgroup.h"
#include "subprocess.h"

namespace cuflight::collector::testing {
namespace {

namespace fs = std::filesystem;
using blackbox::WireLaunchRecord;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Ring = inject::MpscRing<WireLaunchRecord>;
using Clock = std::chrono::steady_clock;

std::string CollectorPath() {
  return cuflight::testing::PathFromEnv("CUFLIGHT_TEST_COLLECTOR", CUFLIGHT_COLLECTOR_PATH);
}

// The producer's first events, as in collector_blackbox_test.cc: process_start (0), its device
// (1) and three kernels (2, 3, 4).
constexpr uint64_t kFirstEvents = 5;
std::string FirstEvents() {
  ProducerIdentity id;
  id.pid = 1;  // a stand-in: the collector names the stream by the kernel's pid
  std::string bytes = ProcessStartLine(id, 0) + DeviceLine(id, 1, 0);
  for (uint64_t seq = 2; seq < kFirstEvents; ++seq) bytes += KernelLine(id, seq, 100 + seq);
  return bytes;
}

blackbox::DeviceFacts H100() {
  blackbox::DeviceFacts d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.uuid = "GPU-8f6a7b3e-1c2d-4e5f-9a0b-123456789abc";
  d.limits = occupancy::FindDevicePreset("h100-sxm")->limits;
  return d;
}

// A black box as the injected library leaves it after sending FirstEvents (the device announced
// under seq 1, seq_base 5), with `records` launches of one function, named `mangled` and
// `demangled`, committed in its ring of `ring_capacity` and none handled: the seqs 5, 6, ...
// are theirs. Written by the real region writer and the real ring.
std::unique_ptr<blackbox::RegionWriter> RingBox(uint32_t ring_capacity, uint32_t records,
                                                const std::string& mangled,
                                                const std::string& demangled) {
  blackbox::RegionOptions o;
  o.ring_capacity = ring_capacity;
  o.journal_capacity = 2;
  o.function_capacity = 64;
  o.names_bytes = 64 << 10;
  std::string error;
  auto region = blackbox::RegionWriter::Create(o, &error);
  EXPECT_NE(region, nullptr) << error;
  if (region == nullptr) return nullptr;
  blackbox::FunctionFacts f;
  f.key = 1;
  f.attributes_ok = true;
  f.num_regs = 32;
  f.max_threads_per_block = 1024;
  f.name = mangled;
  f.demangled = demangled;
  const uint32_t k = region->AddFunction(f, 0, H100());
  Ring ring(ring_capacity, Ring::Storage{region->ring_control(), region->ring_slots()});
  for (uint32_t i = 0; i < records; ++i) {
    WireLaunchRecord r;
    r.ts_ns = 1'732'000'000'000'000'000 + static_cast<int64_t>(i);
    r.correlation_id = 1000 + i;
    r.grid[0] = 264;
    r.block[0] = 256;
    r.function_desc = k;
    EXPECT_TRUE(ring.TryPush(r));
  }
  region->AnnounceDevice(0, 1, 1'732'000'000'000'000'001);
  region->PublishState({.seq_base = kFirstEvents, .handled_pos = 0, .announced_devices = 1});
  return region;
}

// The attack: a 64 MiB black box (the most the collector accepts) with a 16,384-slot ring and a
// names area filling the rest, whose producer wrote only the header, the ring's control words,
// the ring's first slot (one committed launch), a function descriptor, its names and the
// device's descriptor: 6 of its 16,384 pages. Then its header is made to claim every ring slot in
// use and the whole names area committed.
struct SparseBox {
  std::unique_ptr<blackbox::RegionWriter> region;
  uint64_t claimed_names = 0;
};
SparseBox MakeSparseBox() {
  blackbox::RegionOptions o;
  o.ring_capacity = 16384;
  o.journal_capacity = 2;
  o.function_capacity = 64;
  o.names_bytes = 4096;
  o.names_bytes += blackbox::kMaxRegionBytes - blackbox::RegionWriter::RegionBytes(o);
  EXPECT_EQ(blackbox::RegionWriter::RegionBytes(o), blackbox::kMaxRegionBytes);
  std::string error;
  SparseBox box;
  box.region = blackbox::RegionWriter::Create(o, &error);
  EXPECT_NE(box.region, nullptr) << error;
  if (box.region == nullptr) return box;
  blackbox::FunctionFacts f;
  f.key = 1;
  f.attributes_ok = true;
  f.num_regs = 32;
  f.max_threads_per_block = 1024;
  f.name = "_Z6kernelPfi";
  f.demangled = "kernel(float*, int)";
  const uint32_t k = box.region->AddFunction(f, 0, H100());
  // Slot 0 committed by hand (turn word = position + 1, region_layout.h design point 4): the
  // ring's own constructor would write every slot's turn word, allocating the whole ring.
  WireLaunchRecord r;
  r.ts_ns = 1'732'000'000'000'000'000;
  r.correlation_id = 105;
  r.grid[0] = 264;
  r.block[0] = 256;
  r.function_desc = k;
  const auto& slots = *reinterpret_cast<const blackbox::RegionHeader*>(box.region->bytes().data());
  uint8_t slot[blackbox::kRingSlotBytes] = {};
  const uint64_t turn = 1;
  std::memcpy(slot, &turn, sizeof(turn));
  std::memcpy(slot + blackbox::kRingSlotRecordOffset, &r, sizeof(r));
  EXPECT_EQ(
      pwrite(box.region->fd(), slot, sizeof(slot), static_cast<off_t>(slots.ring_slots_offset)),
      ssize_t(sizeof(slot)));
  box.region->AnnounceDevice(0, 1, 1'732'000'000'000'000'001);
  box.region->PublishState({.seq_base = kFirstEvents, .handled_pos = 0, .announced_devices = 1});
  // The claims, written into the pages already there.
  const int fd = box.region->fd();
  const auto& h = *reinterpret_cast<const blackbox::RegionHeader*>(box.region->bytes().data());
  const uint64_t enqueued = o.ring_capacity;
  EXPECT_EQ(pwrite(fd, &enqueued, sizeof(enqueued),
                   static_cast<off_t>(h.ring_control_offset + blackbox::kRingEnqueueOffset)),
            ssize_t(sizeof(enqueued)));
  box.claimed_names = h.names_bytes;
  EXPECT_EQ(pwrite(fd, &box.claimed_names, sizeof(box.claimed_names),
                   offsetof(blackbox::RegionHeader, names_committed)),
            ssize_t(sizeof(box.claimed_names)));
  return box;
}

// Bytes of `fd` the kernel has allocated (st_blocks is in 512-byte units, stat(2)).
uint64_t AllocatedBytes(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

// Whether the last 4 KiB of the log of `pid` hold its process_lost (read while the collector
// runs: only a substring is looked for, no line is parsed).
bool HasProcessLost(const fs::path& logs, pid_t pid) {
  const fs::path file = FindLog(logs, "trainer", pid);
  if (file.empty()) return false;
  std::ifstream in(file, std::ios::binary);
  in.seekg(0, std::ios::end);
  const auto size = static_cast<int64_t>(in.tellg());
  const int64_t from = std::max<int64_t>(0, size - 4096);
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  return tail.find(R"("type":"process_lost")") != std::string::npos;
}

// The collector binary, started inside `cgroup` when given (its first instruction already
// charged there).
std::unique_ptr<ChildProcess> StartCollector(const fs::path& dir, const MemoryCgroup* cgroup,
                                             const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"--socket",       (dir / "c.sock").string(),
                                   "--log-dir",      (dir / "logs").string(),
                                   "--rotate-bytes", "1G"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::unique_ptr<ChildProcess> child;
  if (cgroup != nullptr) {
    args.insert(args.begin(), {cgroup->procs_file().string(), CollectorPath()});
    args.insert(args.begin(), {"-c", R"(echo $$ > "$0" && exec "$@")"});
    child = std::make_unique<ChildProcess>("/bin/sh", args, dir / "collector.out");
  } else {
    child = std::make_unique<ChildProcess>(CollectorPath(), args, dir / "collector.out");
  }
  EXPECT_TRUE(WaitForSocket(dir / "c.sock", seconds(20))) << child->Output();
  return child;
}

// Stops the collector (SIGTERM) and expects a clean exit.
void StopCollector(ChildProcess& collector) {
  collector.Signal(SIGTERM);
  EXPECT_EQ(collector.Wait(seconds(60)), 0) << collector.Output();
}

// The stored seqs of `lines` (process_lost left out) and its process_lost line.
struct Stream {
  std::vector<uint64_t> seqs;
  std::string lost;
  size_t recovered = 0;
};
Stream StreamOf(const std::vector<LoggedLine>& lines) {
  Stream s;
  for (const LoggedLine& l : lines) {
    if (l.type == "process_lost") {
      s.lost = l.text;
      continue;
    }
    s.seqs.push_back(l.seq);
    if (l.text.find(R"("recovered":true)") != std::string::npos) ++s.recovered;
  }
  return s;
}

std::vector<uint64_t> Range(uint64_t first, uint64_t end) {
  std::vector<uint64_t> r;
  for (uint64_t s = first; s < end; ++s) r.push_back(s);
  return r;
}

// Five sparse boxes, one after the other, each kept open by the test (the producer's sibling)
// after its producer died; then a real box of a full 8,192-slot ring. The budget: one box claims
// 62 MiB of names and a 2 MiB ring; what the collector's cgroup may grow by over all five is a
// quarter of one box's claim (16 MiB), and the boxes themselves must not grow (pread of a hole
// allocates nothing). The figures are printed for the record.
TEST(CollectorRecoveryTest, SparseBlackBoxesCostTheCollectorOnlyWhatWasWritten) {
  constexpr int kBoxes = 5;
  constexpr uint64_t kGrowthBound = uint64_t{16} << 20;
  MemoryCgroup cgroup(uint64_t{200} << 20);  // the issue's: the old reader died at the third box
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  TempDir dir;
  const fs::path logs = dir.path() / "logs";
  auto collector = StartCollector(dir.path(), &cgroup, {});
  ASSERT_TRUE(collector->running());
  const uint64_t before = cgroup.current();

  std::vector<SparseBox> boxes;
  std::vector<pid_t> sparse_pids;
  for (int i = 0; i < kBoxes; ++i) {
    SCOPED_TRACE(i);
    boxes.push_back(MakeSparseBox());
    ASSERT_NE(boxes.back().region, nullptr);
    const int fd = boxes.back().region->fd();
    const uint64_t allocated = AllocatedBytes(fd);
    EXPECT_LE(allocated, uint64_t{64} << 10);  // a few pages of the 64 MiB it claims
    const pid_t pid = SpawnProducer(dir.path() / "c.sock", FirstEvents(), {fd}, End::kKill);
    sparse_pids.push_back(pid);
    Reap(pid, false);
    ASSERT_TRUE(WaitUntil(
        [&] { return HasProcessLost(logs, pid) || collector->Wait(milliseconds(0)).has_value(); },
        seconds(60)))
        << cgroup.oom_kills() << " OOM kills in the collector's cgroup, usage "
        << (cgroup.current() >> 10) << " KiB";
    ASSERT_FALSE(collector->Wait(milliseconds(0)).has_value())
        << "the collector died (" << cgroup.oom_kills() << " OOM kills in its cgroup)\n"
        << collector->Output();
    EXPECT_EQ(AllocatedBytes(fd), allocated) << "reading the box allocated its holes";
  }
  const uint64_t after = cgroup.current();
  const std::optional<uint64_t> peak = cgroup.peak();
  std::printf("%s: usage %llu KiB before, %llu KiB after %d sparse boxes (peak %s KiB)\n",
              cgroup.kind().c_str(), static_cast<unsigned long long>(before >> 10),
              static_cast<unsigned long long>(after >> 10), kBoxes,
              peak ? std::to_string(*peak >> 10).c_str() : "n/a");
  EXPECT_EQ(cgroup.oom_kills(), 0u);
  EXPECT_LE(after, before + kGrowthBound);
  if (peak) {
    EXPECT_LE(*peak, before + kGrowthBound);
  }

  // A real box of a full ring, beside the sparse ones still held open.
  auto real = RingBox(8192, 8192, "_Z6kernelPfi", "kernel(float*, int)");
  ASSERT_NE(real, nullptr);
  const pid_t real_pid =
      SpawnProducer(dir.path() / "c.sock", FirstEvents(), {real->fd()}, End::kKill);
  Reap(real_pid, false);
  ASSERT_TRUE(WaitUntil([&] { return HasProcessLost(logs, real_pid); }, seconds(120)))
      << collector->Output();
  StopCollector(*collector);
  EXPECT_EQ(cgroup.oom_kills(), 0u);

  // Each sparse box: the 5 events sent (0..4), then its one committed launch (seq 5); the 16,383
  // positions it claimed and never wrote used no seq (torn), so nothing is lost.
  for (const pid_t pid : sparse_pids) {
    SCOPED_TRACE(pid);
    const fs::path file = FindLog(logs, "trainer", pid);
    ASSERT_FALSE(file.empty());
    const Stream s = StreamOf(ReadLog(file));
    EXPECT_EQ(s.seqs, Range(0, kFirstEvents + 1));
    EXPECT_EQ(s.recovered, 1u);
    EXPECT_NE(s.lost.find(R"("events_stored":6,"events_lost":0,"events_recovered":1})"),
              std::string::npos)
        << s.lost;
  }
  // The real box: 5 sent, the 8,192 launches in its ring recovered as seqs 5..8196.
  const fs::path file = FindLog(logs, "trainer", real_pid);
  ASSERT_FALSE(file.empty());
  const Stream s = StreamOf(ReadLog(file));
  EXPECT_EQ(s.seqs, Range(0, kFirstEvents + 8192));
  EXPECT_EQ(s.recovered, 8192u);
  EXPECT_NE(s.lost.find(R"("events_stored":8197,"events_lost":0,"events_recovered":8192})"),
            std::string::npos)
      << s.lost;
  EXPECT_EQ(LogFiles(logs).size(), static_cast<size_t>(kBoxes + 1));
}

// A CUTLASS-length kernel name: `bytes` characters of a mangled template instantiation.
std::string LongName(const std::string& prefix, size_t bytes) {
  std::string name = prefix;
  for (int i = 0; name.size() < bytes; ++i) name += "N7cutlass4gemm6kernel" + std::to_string(i);
  name.resize(bytes);
  return name;
}

// A live producer beside the dying ones: sends a kernel event every 10 ms on its own thread and
// times each one's ack; the slowest before Measure() and after it.
class AckTimer {
 public:
  explicit AckTimer(const fs::path& socket) : client_(RawClient::Unix(socket)) {
    live_.pid = static_cast<int32_t>(getpid());
    live_.exe = "/opt/app/bin/live";
    if (!client_.Send(ProcessStartLine(live_, 0)) || client_.WaitAck(0) != 0u) {
      failed_ = true;
      return;
    }
    thread_ = std::thread([this] { Loop(); });
  }
  ~AckTimer() { Stop(); }
  AckTimer(const AckTimer&) = delete;
  AckTimer& operator=(const AckTimer&) = delete;

  // Waits until 20 acks came (the normal latency is measured); false if they did not.
  bool Started() {
    return WaitUntil([&] { return acked_.load() >= 20 || failed_.load(); }, seconds(30)) &&
           !failed_.load();
  }
  void Measure() { during_ = true; }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  bool failed() const { return failed_.load(); }
  int64_t worst_before_us() const { return worst_before_us_.load(); }
  int64_t worst_during_us() const { return worst_during_us_.load(); }

 private:
  void Loop() {
    // Bounded: the test calls Stop within its deadlines, and each ack wait is bounded too.
    for (uint64_t seq = 1; !stop_.load(); ++seq) {
      const auto sent = Clock::now();
      const bool measuring = during_.load();
      if (!client_.Send(KernelLine(live_, seq, seq)) || client_.WaitAck(seq, seconds(20)) != seq) {
        failed_ = true;
        return;
      }
      const int64_t us =
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - sent).count();
      auto& worst = measuring ? worst_during_us_ : worst_before_us_;
      worst = std::max<int64_t>(worst.load(), us);
      acked_ = seq;
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  RawClient client_;
  ProducerIdentity live_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> during_{false};
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> acked_{0};
  std::atomic<int64_t> worst_before_us_{0};
  std::atomic<int64_t> worst_during_us_{0};
};

// Six producers with full 8,192-slot rings of CUTLASS-length names (each box gives about 17 MiB
// of lines), killed together, beside a live producer that sends a kernel event every 10 ms and
// times its ack. --max-pending-bytes is 16 MiB: less than one box gives, so the six must be
// written as they are read. Expected: every launch of the six rings stored (stored + lost =
// written, lost = 0), and no ack of the live producer later than a second (its normal latency is
// a few milliseconds; the old inline reading took seconds).
TEST(CollectorRecoveryTest, SixDeathsAtOnceLoseNothingAndKeepOthersAcksPrompt) {
  constexpr int kDead = 6;
  constexpr uint32_t kRecords = 8192;
  constexpr auto kAckBound = milliseconds(1000);
  TempDir dir;
  const fs::path logs = dir.path() / "logs";
  auto collector = StartCollector(dir.path(), nullptr, {"--max-pending-bytes", "16M"});
  ASSERT_TRUE(collector->running());

  const std::string mangled = LongName("_ZN7cutlass6KernelINS_4gemm", 700);
  const std::string demangled = LongName("cutlass::Kernel<cutlass::gemm::", 1000);
  std::vector<std::unique_ptr<blackbox::RegionWriter>> boxes;
  std::vector<pid_t> pids;
  for (int i = 0; i < kDead; ++i) {
    boxes.push_back(RingBox(kRecords, kRecords, mangled, demangled));
    ASSERT_NE(boxes.back(), nullptr);
    pids.push_back(
        SpawnProducer(dir.path() / "c.sock", FirstEvents(), {boxes.back()->fd()}, End::kHold));
  }

  AckTimer timer(dir.path() / "c.sock");
  ASSERT_TRUE(timer.Started());

  // Every producer's first events are stored before the kill.
  ASSERT_TRUE(WaitUntil([&] {
    for (const pid_t pid : pids) {
      if (FindLog(logs, "trainer", pid).empty()) return false;
    }
    return true;
  }));
  timer.Measure();
  const auto killed = Clock::now();
  for (const pid_t pid : pids) kill(pid, SIGKILL);
  for (const pid_t pid : pids) Reap(pid, false);
  const bool all_read = WaitUntil(
      [&] {
        return std::all_of(pids.begin(), pids.end(),
                           [&](pid_t pid) { return HasProcessLost(logs, pid); });
      },
      seconds(180), milliseconds(20));
  const auto read_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - killed).count();
  timer.Stop();
  EXPECT_TRUE(all_read) << collector->Output();
  EXPECT_FALSE(timer.failed()) << "the live producer's ack did not come";
  std::printf(
      "six boxes read in %lld ms; the live producer's slowest ack: %lld us before, %lld us "
      "during\n",
      static_cast<long long>(read_ms), static_cast<long long>(timer.worst_before_us()),
      static_cast<long long>(timer.worst_during_us()));
  EXPECT_LT(timer.worst_during_us(), std::chrono::microseconds(kAckBound).count());
  StopCollector(*collector);

  // Written by each: 5 sent + 8,192 in its ring = 8,197 seqs; stored + lost must be that, with
  // nothing lost.
  for (const pid_t pid : pids) {
    SCOPED_TRACE(pid);
    const fs::path file = FindLog(logs, "trainer", pid);
    ASSERT_FALSE(file.empty());
    const Stream s = StreamOf(ReadLog(file));
    EXPECT_EQ(s.seqs, Range(0, kFirstEvents + kRecords));
    EXPECT_EQ(s.recovered, kRecords);
    EXPECT_NE(s.lost.find(R"("events_stored":8197,"events_lost":0,"events_recovered":8192})"),
              std::string::npos)
        << s.lost;
  }
}

// The issue's forged box: 8,192 ring records naming one function with a 30,000-character name,
// about 31 KB a line, 250 MB in all. The collector stops at 128 MiB of lines for one box
// (docs/collector.md), counts the rest lost (stored + lost = the 8,197 seqs the box and its
// first events used), and the live producer's acks stay prompt while it reads.
TEST(CollectorRecoveryTest, AForgedBoxIsCappedAndDoesNotDelayOthers) {
  constexpr uint32_t kRecords = 8192;
  constexpr uint64_t kCap = uint64_t{128} << 20;
  constexpr auto kAckBound = milliseconds(1000);
  TempDir dir;
  const fs::path logs = dir.path() / "logs";
  // Buffers larger than the box gives: what stops it must be the cap of one box.
  auto collector = StartCollector(dir.path(), nullptr, {"--max-pending-bytes", "512M"});
  ASSERT_TRUE(collector->running());
  const std::string name = LongName("_ZN7cutlass6KernelINS_4gemm", 30000);
  auto box = RingBox(kRecords, kRecords, name, "");
  ASSERT_NE(box, nullptr);
  const pid_t pid = SpawnProducer(dir.path() / "c.sock", FirstEvents(), {box->fd()}, End::kHold);
  AckTimer timer(dir.path() / "c.sock");
  ASSERT_TRUE(timer.Started());
  ASSERT_TRUE(WaitUntil([&] { return !FindLog(logs, "trainer", pid).empty(); }));
  timer.Measure();
  Reap(pid, true);
  const bool read =
      WaitUntil([&] { return HasProcessLost(logs, pid); }, seconds(300), milliseconds(20));
  timer.Stop();
  EXPECT_TRUE(read) << collector->Output();
  EXPECT_FALSE(timer.failed()) << "the live producer's ack did not come";
  std::printf("the live producer's slowest ack: %lld us before, %lld us during\n",
              static_cast<long long>(timer.worst_before_us()),
              static_cast<long long>(timer.worst_during_us()));
  EXPECT_LT(timer.worst_during_us(), std::chrono::microseconds(kAckBound).count());
  StopCollector(*collector);

  const fs::path file = FindLog(logs, "trainer", pid);
  ASSERT_FALSE(file.empty());
  const std::vector<LoggedLine> lines = ReadLog(file);
  uint64_t recovered_bytes = 0;
  uint64_t longest = 0;
  for (const LoggedLine& l : lines) {
    if (l.text.find(R"("recovered":true)") == std::string::npos) continue;
    recovered_bytes += l.text.size() + 1;  // and its '\n'
    longest = std::max<uint64_t>(longest, l.text.size() + 1);
  }
  const Stream s = StreamOf(lines);
  ASSERT_GT(s.recovered, 0u);
  EXPECT_LE(recovered_bytes, kCap);
  EXPECT_GT(recovered_bytes + longest, kCap);  // it stopped at the cap, not before
  // The seqs: 0..4 sent, then the recovered ones from 5 on; every other seq of the 8,192 is lost.
  EXPECT_EQ(s.seqs, Range(0, kFirstEvents + s.recovered));
  const uint64_t lost = kRecords - s.recovered;
  EXPECT_NE(s.lost.find(R"("events_stored":)" + std::to_string(kFirstEvents + s.recovered) +
                        R"(,"events_lost":)" + std::to_string(lost) + R"(,"events_recovered":)" +
                        std::to_string(s.recovered) + "}"),
            std::string::npos)
      << s.lost;
}

// A collector stopped (SIGTERM) while it reads a black box finishes the reading before it exits,
// and writes the process's process_lost once, last, with stored + lost = what the box used.
TEST(CollectorRecoveryTest, AStopDuringAReadingFinishesItAndWritesProcessLostOnce) {
  constexpr uint32_t kRecords = 8192;
  TempDir dir;
  const fs::path logs = dir.path() / "logs";
  auto collector = StartCollector(dir.path(), nullptr, {"--max-pending-bytes", "512M"});
  ASSERT_TRUE(collector->running());
  // 8,192 lines of about 31 KB: the reading takes a second or more, a slice at a time.
  auto box = RingBox(kRecords, kRecords, LongName("_ZN7cutlass6KernelINS_4gemm", 30000), "");
  ASSERT_NE(box, nullptr);
  const pid_t pid = SpawnProducer(dir.path() / "c.sock", FirstEvents(), {box->fd()}, End::kHold);
  fs::path file;
  ASSERT_TRUE(WaitUntil([&] { return !(file = FindLog(logs, "trainer", pid)).empty(); }));
  std::error_code ec;
  const uintmax_t sent_bytes = fs::file_size(file, ec);
  Reap(pid, true);
  // Stopped once the reading has stored something (a recovered line is 31 KB).
  ASSERT_TRUE(
      WaitUntil([&] { return fs::file_size(file, ec) > sent_bytes + (64 << 10); }, seconds(60)));
  const bool mid_reading = !HasProcessLost(logs, pid);
  StopCollector(*collector);
  std::printf("stopped %s the reading\n", mid_reading ? "during" : "after");

  const std::vector<LoggedLine> lines = ReadLog(file);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().type, "process_lost");
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const LoggedLine& l) { return l.type == "process_lost"; }),
            1);
  const Stream s = StreamOf(lines);
  ASSERT_GT(s.recovered, 0u);
  EXPECT_EQ(s.seqs, Range(0, kFirstEvents + s.recovered));
  EXPECT_NE(s.lost.find(R"("events_stored":)" + std::to_string(kFirstEvents + s.recovered) +
                        R"(,"events_lost":)" + std::to_string(kRecords - s.recovered) +
                        R"(,"events_recovered":)" + std::to_string(s.recovered) + "}"),
            std::string::npos)
      << s.lost;
}

}  // namespace
}  // namespace cuflight::collector::testing
