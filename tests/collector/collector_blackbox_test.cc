// The collector and producers' black boxes (docs/protocol.md, "The black box"): producer
// processes (forked from the test, which prepares every byte first: the children make only
// system calls) connect over the Unix socket, pass a descriptor with their first bytes, send some
// events and die or linger. The collector in this process must store what a good black box
// gives after its producer died, refuse every bad descriptor with a count and nothing else lost,
// and leave alone the black box of a producer that still runs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "blackbox_producer.h"
#include "collector_test_util.h"
#include "cuflight/blackbox/region_layout.h"
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/inject/ring.h"
#include "cuflight/occupancy/device_presets.h"

namespace cuflight::collector::testing {
namespace {

using blackbox::WireLaunchRecord;
using Ring = inject::MpscRing<WireLaunchRecord>;

// The producer's first events: process_start (0), its device (1) and three kernels (2, 3, 4),
// with a stand-in pid (the collector names the stream by the kernel's).
std::string FirstEvents() {
  ProducerIdentity id;
  id.pid = 1;
  std::string bytes = ProcessStartLine(id, 0) + DeviceLine(id, 1, 0);
  for (uint64_t seq = 2; seq <= 4; ++seq) bytes += KernelLine(id, seq, 100 + seq);
  return bytes;
}

// A black box as the injected library leaves it after sending FirstEvents: the device announced
// under seq 1, the record of correlation 105 handled (seq 5) and journaled, unwritten, and the
// records of 106 and 107 still in the ring.
std::unique_ptr<blackbox::RegionWriter> GoodBlackbox() {
  blackbox::RegionOptions o;
  o.ring_capacity = 64;
  o.journal_capacity = 64;
  std::string error;
  auto region = blackbox::RegionWriter::Create(o, &error);
  EXPECT_NE(region, nullptr) << error;
  if (region == nullptr) return nullptr;
  blackbox::FunctionFacts f;
  f.key = 1;
  f.attributes_ok = true;
  f.num_regs = 32;
  f.max_threads_per_block = 1024;
  f.name = "_Z6kernelPfi";
  f.demangled = "kernel(float*, int)";
  blackbox::DeviceFacts d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.uuid = "GPU-8f6a7b3e-1c2d-4e5f-9a0b-123456789abc";
  d.limits = occupancy::FindDevicePreset("h100-sxm")->limits;
  const uint32_t k = region->AddFunction(f, 0, d);
  Ring ring(64, Ring::Storage{region->ring_control(), region->ring_slots()});
  for (uint64_t c = 105; c <= 107; ++c) {
    WireLaunchRecord r;
    r.ts_ns = 1'732'000'000'000'000'000 + static_cast<int64_t>(c);
    r.correlation_id = c;
    r.grid[0] = 264;
    r.block[0] = 256;
    r.function_desc = k;
    ring.TryPush(r);
  }
  region->AnnounceDevice(0, 1, 1'732'000'000'000'000'001);
  region->PublishState({.seq_base = 5, .handled_pos = 0, .announced_devices = 1});
  WireLaunchRecord r;
  uint64_t pos = 0;
  ring.TryPeek(&r, &pos);
  region->Commit(5, pos, &r, {.seq_base = 6, .handled_pos = 1, .announced_devices = 1});
  ring.Consume();
  return region;
}

// A memfd of `size` bytes holding `header` at its start, with `seals`.
int Memfd(uint64_t size, const std::string& header, int seals) {
  const int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  if (!header.empty()) {
    EXPECT_EQ(pwrite(fd, header.data(), header.size(), 0), ssize_t(header.size()));
  }
  if (seals != 0) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
  }
  return fd;
}

struct Logged {
  std::vector<LoggedLine> lines;
  size_t recovered = 0;
};

// The log of the producer `pid` once its process_lost is there.
Logged WaitForLog(const std::filesystem::path& logs, pid_t pid) {
  Logged out;
  EXPECT_TRUE(WaitUntil([&] {
    const std::filesystem::path file = FindLog(logs, "trainer", pid);
    if (file.empty()) return false;
    out.lines = ReadLog(file);
    return !out.lines.empty() && out.lines.back().type == "process_lost";
  }));
  for (const LoggedLine& l : out.lines) {
    if (l.text.find(R"("recovered":true)") != std::string::npos) ++out.recovered;
  }
  return out;
}

class CollectorBlackboxTest : public ::testing::Test {
 protected:
  // The collector's counters once `done` holds of them (they are published at the end of each
  // loop turn, after the log lines).
  static IngestStats StatsWhen(const RunningCollector& running,
                               const std::function<bool(const IngestStats&)>& done) {
    IngestStats stats;
    EXPECT_TRUE(WaitUntil([&] {
      stats = running.stats();
      return done(stats);
    }));
    return stats;
  }

  TempDir dir_;
  CollectorOptions options_ = TestOptions(dir_.path());
};

// A producer killed after sending seqs 0..4: its black box gives the journaled kernel (5) and
// the two records still in the ring (6, 7), stored before process_lost, which says so.
TEST_F(CollectorBlackboxTest, AKilledProducersBlackBoxGivesWhatItHadNotSent) {
  RunningCollector running(options_);
  ASSERT_NE(running.collector(), nullptr);
  const auto region = GoodBlackbox();
  ASSERT_NE(region, nullptr);
  const pid_t pid = SpawnProducer(options_.socket, FirstEvents(), {region->fd()}, End::kKill);
  Reap(pid, false);
  const Logged log = WaitForLog(options_.log_dir, pid);
  ASSERT_EQ(log.lines.size(), 9u);
  for (uint64_t seq = 0; seq < 8; ++seq) {
    EXPECT_EQ(log.lines[seq].seq, seq);
    EXPECT_EQ(log.lines[seq].pid, pid);
  }
  EXPECT_EQ(log.recovered, 3u);
  EXPECT_NE(log.lines[5].text.find(R"("correlation_id":105)"), std::string::npos);
  EXPECT_NE(log.lines[7].text.find(R"("correlation_id":107)"), std::string::npos);
  EXPECT_NE(log.lines[7].text.find(R"("name":"_Z6kernelPfi")"), std::string::npos);
  EXPECT_NE(
      log.lines[8].text.find(
          R"("last_seq":7,"reason":"disconnected","events_stored":8,"events_lost":0,"events_recovered":3})"),
      std::string::npos)
      << log.lines[8].text;
  const IngestStats stats =
      StatsWhen(running, [](const IngestStats& s) { return s.blackboxes_read == 1; });
  EXPECT_EQ(stats.blackboxes_received, 1u);
  EXPECT_EQ(stats.events_recovered, 3u);
  EXPECT_EQ(stats.blackbox_errors, 0u);
}

// Descriptors that are not a black box the collector may map: each refused and counted; the
// producer's events are all stored and its process_lost says nothing was recovered.
TEST_F(CollectorBlackboxTest, BadDescriptorsAreRefusedAndNothingElseIsLost) {
  RunningCollector running(options_);
  ASSERT_NE(running.collector(), nullptr);
  char name[] = "/tmp/cuflight-not-a-memfd-XXXXXX";
  const int file = mkstemp(name);
  ASSERT_GE(file, 0);
  unlink(name);
  ASSERT_EQ(ftruncate(file, 1 << 20), 0);
  const auto good = GoodBlackbox();
  std::string valid_header(blackbox::kHeaderBytes, '\0');
  std::memcpy(valid_header.data(), good->bytes().data(), blackbox::kHeaderBytes);
  const int sealed = F_SEAL_SHRINK | F_SEAL_GROW;
  const std::vector<std::pair<std::string, int>> cases = {
      {"not_memfd", file},
      {"not_sealed", Memfd(good->bytes().size(), valid_header, 0)},
      {"too_small", Memfd(100, "", sealed)},
      {"too_large", Memfd(blackbox::kMaxRegionBytes + 4096, valid_header, sealed)},
      {"bad_magic", Memfd(good->bytes().size(), "", sealed)},
      {"too_small", Memfd(8192, valid_header, sealed)},  // says it has more than it has
  };
  std::vector<pid_t> pids;
  for (const auto& [reason, fd] : cases) {
    pids.push_back(SpawnProducer(options_.socket, FirstEvents(), {fd}, End::kKill));
  }
  for (const pid_t pid : pids) Reap(pid, false);
  for (size_t i = 0; i < pids.size(); ++i) {
    SCOPED_TRACE(cases[i].first);
    const Logged log = WaitForLog(options_.log_dir, pids[i]);
    ASSERT_EQ(log.lines.size(), 6u);
    EXPECT_EQ(log.recovered, 0u);
    EXPECT_NE(log.lines[5].text.find(R"("events_stored":5,"events_lost":0})"), std::string::npos)
        << log.lines[5].text;
  }
  const IngestStats stats =
      StatsWhen(running, [&](const IngestStats& s) { return s.processes_lost == cases.size(); });
  EXPECT_EQ(stats.blackbox_errors, cases.size());
  EXPECT_EQ(stats.blackboxes_received, 0u);
  EXPECT_EQ(stats.lines_stored, 5u * cases.size());
  for (const auto& c : cases) close(c.second);
}

// A descriptor beyond the black box and the producer's own is refused; the first (a good black
// box) stands.
TEST_F(CollectorBlackboxTest, OneBlackBoxPerConnection) {
  RunningCollector running(options_);
  ASSERT_NE(running.collector(), nullptr);
  const auto region = GoodBlackbox();
  const auto other = GoodBlackbox();
  const pid_t pid = SpawnProducer(options_.socket, FirstEvents(),
                                  {region->fd(), other->fd(), other->fd()}, End::kKill);
  Reap(pid, false);
  const Logged log = WaitForLog(options_.log_dir, pid);
  EXPECT_EQ(log.recovered, 3u);
  const IngestStats stats =
      StatsWhen(running, [](const IngestStats& s) { return s.blackboxes_read == 1; });
  EXPECT_EQ(stats.blackboxes_received, 1u);
  EXPECT_EQ(stats.blackbox_errors, 1u);
}

// A producer that closed its connection and still runs when the wait ends keeps its black box:
// not read, process_lost as without one.
TEST_F(CollectorBlackboxTest, AProducerStillRunningKeepsItsBlackBox) {
  RunningCollector running(options_);
  ASSERT_NE(running.collector(), nullptr);
  const auto region = GoodBlackbox();
  const pid_t pid = SpawnProducer(options_.socket, FirstEvents(), {region->fd()}, End::kLinger);
  const Logged log = WaitForLog(options_.log_dir, pid);
  Reap(pid, true);
  ASSERT_EQ(log.lines.size(), 6u);
  EXPECT_EQ(log.recovered, 0u);
  EXPECT_NE(log.lines[5].text.find(R"("events_lost":0})"), std::string::npos) << log.lines[5].text;
  const IngestStats stats =
      StatsWhen(running, [](const IngestStats& s) { return s.processes_lost == 1; });
  EXPECT_EQ(stats.blackbox_skipped_alive, 1u);
  EXPECT_EQ(stats.blackboxes_read, 0u);
}

// A black box whose live words cannot hold (a journal tail past its head) is an error for it
// alone: nothing made from it, the events sent all stored, process_lost without a recovery.
TEST_F(CollectorBlackboxTest, AnUnreadableBlackBoxIsAnErrorForItAlone) {
  RunningCollector running(options_);
  ASSERT_NE(running.collector(), nullptr);
  const auto region = GoodBlackbox();
  const uint64_t tail = 1000;
  ASSERT_EQ(
      pwrite(region->fd(), &tail, sizeof(tail), offsetof(blackbox::RegionHeader, journal_tail)),
      ssize_t(sizeof(tail)));
  const pid_t pid = SpawnProducer(options_.socket, FirstEvents(), {region->fd()}, End::kKill);
  Reap(pid, false);
  const Logged log = WaitForLog(options_.log_dir, pid);
  ASSERT_EQ(log.lines.size(), 6u);
  EXPECT_EQ(log.recovered, 0u);
  EXPECT_EQ(log.lines[5].text.find("events_recovered"), std::string::npos) << log.lines[5].text;
  const IngestStats stats =
      StatsWhen(running, [](const IngestStats& s) { return s.blackboxes_read == 1; });
  EXPECT_EQ(stats.blackbox_errors, 1u);
}

// ---- learning the producer's end on every kernel (producer_blackbox.h, design note 1) ----
// This kernel has every source; each test turns off those an older kernel, or a collector in a
// pid namespace of its own, lacks, and the producer passes what the injected library passes.

// Linux 5.3 to 6.4 with the collector in its own pid namespace (a DaemonSet on Ubuntu 22.04's
// 5.15): no SO_PEERPIDFD, the producer's pid not visible; the pidfd the producer passed of
// itself tells its end.
TEST_F(CollectorBlackboxTest, BeforeLinux65InAPidNamespaceThePidfdItPassedTells) {
  options_.producer_end_sources.peer_pidfd = false;
  options_.producer_end_sources.pidfd_of_peer = false;
  RunningCollector running(options_);
  ASSERT_NE(running.collector(), nullptr);
  const auto region = GoodBlackbox();
  const pid_t pid =
      SpawnProducer(options_.socket, FirstEvents(), {region->fd()}, End::kKill, Self::kPidfd);
  Reap(pid, false);
  const Logged log = WaitForLog(options_.log_dir, pid);
  ASSERT_EQ(log.lines.size(), 9u);
  EXPECT_EQ(log.recovered, 3u);
  const IngestStats stats =
      StatsWhen(running, [](const IngestStats& s) { return s.blackboxes_read == 1; });
  EXPECT_EQ(stats.blackbox_errors, 0u);
  EXPECT_EQ(stats.events_recovered, 3u);
}

// Linux 4.18 (RHEL 8): no pidfd at all. The producer's /proc directory tells its end, asked on
// the collector's tick: a producer killed and reaped, and one killed and left a zombie (its
// parent has not waited yet), are both gone.
TEST_F(CollectorBlackboxTest, BeforeLinux53TheProcDirectoryItPassedTells) {
  options_.producer_end_sources.peer_pidfd = false;
  options_.producer_end_sources.pidfd_of_peer = false;
  options_.producer_end_sources.passed_pidfd = false;
  RunningCollector running(options_);
  ASSERT_NE(running.collector(), nullptr);
  const auto reaped_box = GoodBlackbox();
  const auto zombie_box = GoodBlackbox();
  const pid_t reaped = SpawnProducer(options_.socket, FirstEvents(), {reaped_box->fd()},
                                     End::kKill, Self::kProcDir);
  Reap(reaped, false);
  const pid_t zombie = SpawnProducer(options_.socket, FirstEvents(), {zombie_box->fd()},
                                     End::kKill, Self::kProcDir);
  EXPECT_EQ(WaitForLog(options_.log_dir, reaped).recovered, 3u);
  EXPECT_EQ(WaitForLog(options_.log_dir, zombie).recovered, 3u);
  Reap(zombie, false);
  const IngestStats stats =
      StatsWhen(running, [](const IngestStats& s) { return s.blackboxes_read == 2; });
  EXPECT_EQ(stats.blackbox_errors, 0u);
  EXPECT_EQ(stats.blackbox_skipped_alive, 0u);
}

// The same /proc directory of a producer that closed its connection and still runs: not gone,
// its black box is not read.
TEST_F(CollectorBlackboxTest, BeforeLinux53AProducerStillRunningKeepsItsBlackBox) {
  options_.producer_end_sources.peer_pidfd = false;
  options_.producer_end_sources.pidfd_of_peer = false;
  options_.producer_end_sources.passed_pidfd = false;
  RunningCollector running(options_);
  ASSERT_NE(running.collector(), nullptr);
  const auto region = GoodBlackbox();
  const pid_t pid = SpawnProducer(options_.socket, FirstEvents(), {region->fd()}, End::kLinger,
                                  Self::kProcDir);
  const Logged log = WaitForLog(options_.log_dir, pid);
  Reap(pid, true);
  EXPECT_EQ(log.recovered, 0u);
  const IngestStats stats =
      StatsWhen(running, [](const IngestStats& s) { return s.processes_lost == 1; });
  EXPECT_EQ(stats.blackbox_skipped_alive, 1u);
  EXPECT_EQ(stats.blackboxes_read, 0u);
}

// What a producer passes of itself must be a pidfd or a /proc directory: a pipe (which a
// hostile producer could make readable at will) or a directory elsewhere is not used, and with
// no source of the kernel's left the box is refused (no_pidfd), its events all stored.
TEST_F(CollectorBlackboxTest, ADescriptorThatIsNeitherPidfdNorProcDirectoryIsNotUsed) {
  options_.producer_end_sources.peer_pidfd = false;
  options_.producer_end_sources.pidfd_of_peer = false;
  RunningCollector running(options_);
  ASSERT_NE(running.collector(), nullptr);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const int tmp_dir = open(dir_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(tmp_dir, 0);
  const auto box1 = GoodBlackbox();
  const auto box2 = GoodBlackbox();
  const auto box3 = GoodBlackbox();
  const std::vector<pid_t> pids = {
      SpawnProducer(options_.socket, FirstEvents(), {box1->fd(), pipe_fds[0]}, End::kKill),
      SpawnProducer(options_.socket, FirstEvents(), {box2->fd(), tmp_dir}, End::kKill),
      SpawnProducer(options_.socket, FirstEvents(), {box3->fd()}, End::kKill)};
  for (const pid_t pid : pids) Reap(pid, false);
  for (const pid_t pid : pids) {
    const Logged log = WaitForLog(options_.log_dir, pid);
    ASSERT_EQ(log.lines.size(), 6u);
    EXPECT_EQ(log.recovered, 0u);
    EXPECT_NE(log.lines[5].text.find(R"("events_stored":5,"events_lost":0})"), std::string::npos)
        << log.lines[5].text;
  }
  const IngestStats stats =
      StatsWhen(running, [](const IngestStats& s) { return s.processes_lost == 3; });
  EXPECT_EQ(stats.blackbox_errors, 3u);
  EXPECT_EQ(stats.blackboxes_received, 0u);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  close(tmp_dir);
}

}  // namespace
}  // namespace cuflight::collector::testing
