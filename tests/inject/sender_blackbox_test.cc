// The sender thread's side of the black box: the pipeline of the injected library with its ring
// in a memfd, a snapshot of that memfd taken as if the process were killed at that moment, and
// the collector's reader on the snapshot. The snapshot's recovery must give exactly the lines the
// sender then sends when it is let go on, byte for byte but for "recovered":true, under the same
// seqs; and with what the collector had already received, every seq exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cuflight/blackbox/region_reader.h"
#include "cuflight/blackbox/region_writer.h"
#include "cuflight/schema/decoder.h"
#include "inject_test_support.h"
#include "running_collector.h"
#include "sender_thread.h"
#include "temp_dir.h"

namespace cuflight::inject::testing {
namespace {

constexpr uint64_t kF = 0x1000;
constexpr uint64_t kG = 0x2000;

uint64_t SeqOf(const std::string& line) {
  const schema::DecodeResult d = schema::Decode(line);
  EXPECT_TRUE(d.ok()) << d.message << ": " << line;
  return d.ok() ? schema::HeaderOf(d.event).seq : UINT64_MAX;
}

// The black box region of a ring of `ring_slots` (and as many journal entries) of this process.
std::unique_ptr<blackbox::RegionWriter> MakeRegion(uint32_t ring_slots) {
  blackbox::RegionOptions o;
  o.ring_capacity = ring_slots;
  o.journal_capacity = ring_slots;
  o.pid = getpid();
  std::string error;
  std::unique_ptr<blackbox::RegionWriter> region = blackbox::RegionWriter::Create(o, &error);
  EXPECT_NE(region, nullptr) << error;
  return region;
}

RecorderOptions WritingTo(blackbox::RegionWriter* region) {
  RecorderOptions ro;
  ro.blackbox = region;
  return ro;
}

// The injected library's pipeline over a black box (the harness's ring in the region, the
// recorder writing to it), sending to `socket` with batching that holds every non-preamble line
// until Finish (the window a kill loses without the black box).
struct BlackboxPipeline {
  std::unique_ptr<blackbox::RegionWriter> region;
  Harness h;
  LaunchRing* ring;
  SenderThread sender;

  // `hold`: non-preamble lines wait in the transport until Finish; else each Poll writes them.
  BlackboxPipeline(const std::string& socket, uint32_t ring_slots, bool hold = true)
      : region(MakeRegion(ring_slots)),
        h(ring_slots, WritingTo(region.get()), "h100-sxm",
          LaunchRing::Storage{region->ring_control(), region->ring_slots()}),
        ring(h.ring.get()),
        sender(h.Sender(Options(socket, region.get(), &h.driver, hold), ReadProcessFacts())) {
    FakeFunction f;
    f.num_regs = 72;
    f.static_smem = 4096;
    h.fake.functions[kF] = f;
    h.fake.functions[kG] = FakeFunction{};
  }

  static SenderThreadOptions Options(const std::string& socket, blackbox::RegionWriter* region,
                                     const DriverApi* driver, bool hold) {
    SenderThreadOptions so;
    // The whole form (CUFLIGHT_INTERN_CONFIGS=0): these tests hold each recovered kernel event
    // byte for byte to the kernel line the sender sent under its seq. Recovery makes whole kernel
    // events either way (docs/crash.md, "Kills"); a kill of the interned form is
    // interned_recording_test.cc's AKillSplitsLaunchesBetweenLinesAndTheBlackBox.
    so.intern_configs = false;
    so.driver = driver;
    so.blackbox = region;
    so.transport.socket_path = socket;
    so.transport.pass_fd = region->fd();
    if (hold) {
      so.transport.flush_interval = std::chrono::hours(1);
      so.transport.batch_bytes = size_t{4} << 20;
    } else {
      so.transport.flush_interval = std::chrono::milliseconds(0);
    }
    so.stats_interval = std::chrono::hours(1);
    return so;
  }

  void Launch(uint64_t function, uint32_t correlation, unsigned dyn_smem = 0) {
    cuLaunchKernel_params params{Fn(function), 264,         1,       1,      256, 1, 1,
                                 dyn_smem,     St(kStream), nullptr, nullptr};
    h.Launch(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &params,
             function == kF ? "_Z4gemmPKfPf" : "_Z1kv", correlation);
  }

  // The black box as a reader finds it after a kill now.
  std::vector<uint8_t> Snapshot() const { return {region->bytes().begin(), region->bytes().end()}; }
};

struct Recovered {
  blackbox::RecoveryResult result;
  std::map<uint64_t, std::string> lines;  // by seq, without the '\n'
};

Recovered RecoverFrom(const std::vector<uint8_t>& bytes, std::optional<uint64_t> after_seq) {
  Recovered out;
  blackbox::RecoveryOptions options;
  options.after_seq = after_seq;
  options.pid = getpid();
  out.result = blackbox::Recover(bytes, options, [&out](uint64_t seq, std::string_view line) {
    out.lines.emplace(seq, std::string(line.substr(0, line.size() - 1)));
  });
  return out;
}

// The line a recovery makes of `sent`: the same with "recovered":true last. A device event the
// sender had not made yet at the kill carries the time of the first launch that needed it instead
// of the time the sender made it afterwards: `ts_ns` is taken from `recovered` for those.
std::string AsRecovered(std::string sent, std::string_view recovered) {
  sent.insert(sent.size() - 1, ",\"recovered\":true");
  if (sent.starts_with(R"({"type":"device",)")) {
    const auto ts = [](std::string_view line) {
      const size_t at = line.find(R"("ts_ns":)");
      return line.substr(at, line.find(',', at) - at);
    };
    const std::string_view from = ts(sent);
    sent.replace(sent.find(from), from.size(), ts(recovered));
    // The black box keeps no PCI bus id: a recovered device event has none
    // (device.schema.json, pci_bus_id).
    if (const size_t at = sent.find(R"(,"pci_bus_id":")"); at != std::string::npos) {
      sent.erase(at, sent.find('"', at + 15) + 1 - at);
    }
  }
  return sent;
}

// Lets the sender finish, then checks the recovery against what it sent: every recovered seq
// carries the line the sender sent under it, and the seqs the collector had before the kill,
// the recovered ones and the rest of the stream leave no gap before process_end but the ring's
// drops.
void ExpectRecoveryMatchesTheSend(BlackboxPipeline& p, StoringCollector& collector,
                                  const std::vector<std::string>& before, const Recovered& got,
                                  uint64_t drops, uint64_t expected_kernels) {
  ASSERT_EQ(got.result.error, blackbox::RegionError::kNone) << got.result.message;
  EXPECT_EQ(got.result.kernels, expected_kernels);
  EXPECT_EQ(got.result.torn + got.result.unrecoverable + got.result.invalid, 0u);
  ASSERT_TRUE(p.sender.Finish(Clock::now() + std::chrono::seconds(10)));
  ASSERT_TRUE(collector.WaitFor(HasProcessEnd));
  std::map<uint64_t, std::string> sent;
  for (const std::string& line : collector.Lines()) sent.emplace(SeqOf(line), line);
  for (const auto& [seq, line] : got.lines) {
    ASSERT_TRUE(sent.count(seq)) << seq;
    EXPECT_EQ(line, AsRecovered(sent[seq], line)) << seq;
  }
  // The stream at the kill: what the collector had, and what recovery gives; process_end (the
  // next event the sender made) takes the seq recovery says the stream ended before.
  std::map<uint64_t, bool> at_kill;
  for (const std::string& line : before) at_kill[SeqOf(line)] = true;
  for (const auto& [seq, line] : got.lines) {
    EXPECT_FALSE(at_kill.count(seq)) << "seq " << seq << " twice";
    at_kill[seq] = true;
  }
  const uint64_t end_seq = got.result.end_seq;
  EXPECT_EQ(sent.rbegin()->first, end_seq);  // process_end
  EXPECT_NE(sent.rbegin()->second.find("\"type\":\"process_end\""), std::string::npos);
  EXPECT_EQ(at_kill.size() + drops, end_seq) << "every seq below the end, once, but drops";
}

// Nothing handled yet: process_start went out alone (the preamble is never held); the device
// event and every kernel come back, the ring's drops as the gap the sender leaves.
TEST(SenderBlackbox, RecordsInTheRingComeBackAsTheSenderSendsThem) {
  const std::string path = TempSocketPath("bb-ring");
  StoringCollector collector(path);
  BlackboxPipeline p(path, 64);
  p.sender.Step(Clock::now());  // process_start
  ASSERT_TRUE(collector.WaitFor([](const auto& lines) { return lines.size() == 1; }));
  for (uint32_t i = 0; i < 100; ++i) p.Launch(i % 3 == 0 ? kG : kF, 100 + i, 1024 * (i % 5));
  ASSERT_EQ(p.ring->dropped(), 36u);
  const std::vector<std::string> before = collector.Lines();
  const Recovered got = RecoverFrom(p.Snapshot(), SeqOf(before.back()));
  EXPECT_EQ(got.result.devices, 1u);
  // 0 process_start, 36 drops, 37 device, 38..101 the 64 kernels; the end at 102.
  EXPECT_EQ(got.lines.begin()->first, 37u);
  EXPECT_EQ(got.result.end_seq, 102u);
  ExpectRecoveryMatchesTheSend(p, collector, before, got, 36, 64);
}

// Records the sender made events of, held by the transport (never written), come back from the
// journal under the seqs they got; the records still in the ring after them.
TEST(SenderBlackbox, HeldEventsComeBackFromTheJournal) {
  const std::string path = TempSocketPath("bb-journal");
  StoringCollector collector(path);
  BlackboxPipeline p(path, 64);
  for (uint32_t i = 0; i < 40; ++i) p.Launch(kF, 200 + i);
  p.sender.Step(Clock::now());  // all 40 handled and held; the preamble written
  ASSERT_TRUE(collector.WaitFor([](const auto& lines) { return lines.size() == 2; }));
  ASSERT_EQ(p.ring->SizeApprox(), 0u);
  for (uint32_t i = 0; i < 10; ++i) p.Launch(kG, 300 + i);    // waiting in the ring
  const std::vector<std::string> before = collector.Lines();  // process_start, device
  const Recovered got = RecoverFrom(p.Snapshot(), SeqOf(before.back()));
  EXPECT_EQ(got.result.devices, 0u);  // the collector has it
  ASSERT_EQ(got.lines.size(), 50u);
  EXPECT_EQ(got.lines.begin()->first, 2u);
  EXPECT_EQ(got.result.end_seq, 52u);
  ExpectRecoveryMatchesTheSend(p, collector, before, got, 0, 50);
}

// The lines the transport wrote are forgotten by the journal; only what followed comes back.
TEST(SenderBlackbox, WrittenLinesLeaveTheJournal) {
  const std::string path = TempSocketPath("bb-written");
  StoringCollector collector(path);
  BlackboxPipeline p(path, 64, /*hold=*/false);
  for (uint32_t i = 0; i < 20; ++i) p.Launch(kF, 400 + i);
  p.sender.Step(Clock::now());  // handled, written, and so forgotten by the journal
  ASSERT_TRUE(collector.WaitFor([](const auto& lines) { return lines.size() == 22; }));
  for (uint32_t i = 0; i < 5; ++i) p.Launch(kF, 500 + i);  // waiting in the ring
  const std::vector<std::string> before = collector.Lines();
  // Even a reader that had nothing gets only the device event (announced) and the 5 waiting.
  const Recovered all = RecoverFrom(p.Snapshot(), std::nullopt);
  ASSERT_EQ(all.lines.size(), 1u + 5u);
  EXPECT_EQ(all.lines.begin()->first, 1u);
  EXPECT_EQ(std::next(all.lines.begin())->first, 22u);
  const Recovered got = RecoverFrom(p.Snapshot(), SeqOf(before.back()));
  EXPECT_EQ(got.lines.size(), 5u);
  EXPECT_EQ(got.lines.begin()->first, 22u);
  ExpectRecoveryMatchesTheSend(p, collector, before, got, 0, 5);
}

}  // namespace
}  // namespace cuflight::inject::testing
