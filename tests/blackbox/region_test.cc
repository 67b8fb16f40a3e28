// The black box end to end without processes: a region written as the injected library writes it
// (writer, ring, sender-thread states), read as the collector reads it after the producer died.
// Each test states the producer's situation at the kill and the events and seqs a recovery must
// give, worked out by hand from the seq rules (docs/protocol.md, "The black box").
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <optional>
#include <string>
#include <variant>

#include "region_test_util.h"

namespace cuflight::blackbox::testing {
namespace {

const schema::OwnedKernelEvent& AsKernel(const schema::OwnedEvent& e) {
  return std::get<schema::OwnedKernelEvent>(e);
}

// The memfd is sealed against shrinking (a collector reading it cannot be made to fault) and
// against growing, and its seals against changes.
TEST(RegionWriterTest, TheMemfdIsSealedAndSized) {
  RegionOptions options;
  options.ring_capacity = 16384;  // the injected library's default ring
  options.journal_capacity = 16384;
  std::string error;
  std::unique_ptr<RegionWriter> writer = RegionWriter::Create(options, &error);
  ASSERT_NE(writer, nullptr) << error;
  const int fd = writer->fd();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  const int seals = fcntl(fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  EXPECT_EQ(lseek(fd, 0, SEEK_END), static_cast<off_t>(writer->bytes().size()));
  EXPECT_EQ(writer->bytes().size(), RegionWriter::RegionBytes(options));
  EXPECT_LE(writer->bytes().size(), kMaxRegionBytes);
  EXPECT_NE(ftruncate(fd, 4096), 0);
  EXPECT_EQ(errno, EPERM);
  std::string message;
  EXPECT_EQ(CheckRegion(writer->bytes(), &message), RegionError::kNone) << message;
}

// A ring too large for the collector's bound gets no black box (the caller keeps its ring in
// its own memory).
TEST(RegionWriterTest, ARingBeyondTheBoundGetsNoRegion) {
  // 262144 slots (32 MiB) with a full journal (11 MiB), the default descriptors and names still
  // fit in 64 MiB (docs/protocol.md); twice that does not.
  RegionOptions fits;
  fits.ring_capacity = 262144;
  fits.journal_capacity = 65536;
  EXPECT_GT(RegionWriter::RegionBytes(fits), 0u);
  fits.ring_capacity = 524288;
  EXPECT_EQ(RegionWriter::RegionBytes(fits), 0u);
  RegionOptions options;
  options.ring_capacity = 1u << 20;  // 128 MiB of slots
  options.journal_capacity = 1u << 16;
  EXPECT_EQ(RegionWriter::RegionBytes(options), 0u);
  std::string error;
  EXPECT_EQ(RegionWriter::Create(options, &error), nullptr);
  EXPECT_NE(error.find("does not fit"), std::string::npos) << error;
}

// Only process_start (seq 0) was sent; three launches are in the ring. The sender would have made
// the device event (seq 1) before the first kernel (2, 3, 4).
TEST(RegionRecoveryTest, RecordsInTheRingGetTheSeqsTheSenderWouldHaveGiven) {
  TestRegion r;
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  const uint32_t g = r.writer->AddFunction(Gemm64(), 0, H100());
  ASSERT_EQ(k, 0u);
  ASSERT_EQ(g, 1u);
  r.writer->PublishState({.seq_base = 1, .handled_pos = 0, .announced_devices = 0});
  ASSERT_TRUE(r.ring->TryPush(Launch(101, k)));
  ASSERT_TRUE(r.ring->TryPush(Launch(102, g)));
  WireLaunchRecord cooperative = Launch(103, k);
  // cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_COOPERATIVE and
  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: both flags are read.
  cooperative.api = LaunchApi::kLaunchKernelEx;
  cooperative.launch_flags = kLaunchCooperative | kLaunchProgrammaticSerialization;
  cooperative.driver_max_active_blocks = 8;  // the driver agrees with the engine
  ASSERT_TRUE(r.ring->TryPush(cooperative));

  const Recovered got = RecoverAll(r.bytes(), /*after_seq=*/0);
  ASSERT_EQ(got.result.error, RegionError::kNone) << got.result.message;
  EXPECT_EQ(got.seqs, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(got.result.end_seq, 5u);
  EXPECT_EQ(got.result.kernels, 3u);
  EXPECT_EQ(got.result.devices, 1u);
  EXPECT_EQ(got.result.torn + got.result.unrecoverable + got.result.invalid, 0u);
  ASSERT_EQ(got.events.size(), 4u);

  const auto& device = std::get<schema::OwnedDeviceEvent>(got.events[0]);
  EXPECT_TRUE(device.recovered);
  EXPECT_EQ(device.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(device.uuid, "GPU-8f6a7b3e-1c2d-4e5f-9a0b-123456789abc");
  EXPECT_EQ(device.sm_count, 132);
  EXPECT_EQ(device.smem_per_sm, 228 * 1024);
  EXPECT_EQ(device.header.ts_ns, 1'732'000'000'000'000'101);  // the first kernel's launch
  EXPECT_EQ(device.header.pid, 4242);

  // kernel: 256 threads = 8 warps; 32 regs x 256 = 8192 regs per block, 65536 / 8192 = 8
  // blocks, and 64 warps per SM / 8 = 8 blocks: 8 resident blocks, 64 warps, occupancy 1.
  // Grid 264 over 132 SMs x 8 = 1056 slots: 0.25 waves.
  const schema::OwnedKernelEvent& a = AsKernel(got.events[1]);
  EXPECT_TRUE(a.recovered);
  EXPECT_EQ(a.header.seq, 2u);
  EXPECT_EQ(a.header.ts_ns, 1'732'000'000'000'000'101);
  EXPECT_EQ(a.correlation_id, 101u);
  EXPECT_EQ(a.name, "_Z6kernelPfi");
  EXPECT_EQ(a.demangled, "kernel(float*, int)");
  EXPECT_EQ(a.api, "cuLaunchKernel");
  EXPECT_EQ(a.tid, 4243);
  EXPECT_EQ(a.num_regs, 32);
  EXPECT_EQ(a.occupancy.max_active_blocks, 8);
  EXPECT_EQ(a.occupancy.active_warps, 64);
  EXPECT_DOUBLE_EQ(a.occupancy.occupancy, 1.0);
  EXPECT_DOUBLE_EQ(a.occupancy.waves, 0.25);
  EXPECT_EQ(a.occupancy_source, schema::OccupancySource::kEngine);  // the driver did not say
  // gemm: 64 regs x 256 = 16384 per block: 4 blocks, 32 warps, occupancy 0.5, registers bind.
  const schema::OwnedKernelEvent& b = AsKernel(got.events[2]);
  EXPECT_EQ(b.correlation_id, 102u);
  EXPECT_EQ(b.name, "_Z4gemmv");
  EXPECT_EQ(b.local_bytes, 16);
  EXPECT_EQ(b.const_bytes, 128);
  EXPECT_EQ(b.occupancy.max_active_blocks, 4);
  EXPECT_DOUBLE_EQ(b.occupancy.occupancy, 0.5);
  EXPECT_EQ(b.occupancy.limiting_resource, schema::Resource::kRegisters);
  const schema::OwnedKernelEvent& c = AsKernel(got.events[3]);
  EXPECT_EQ(c.api, "cuLaunchKernelEx");
  EXPECT_TRUE(c.cooperative);
  EXPECT_EQ(c.occupancy_source, schema::OccupancySource::kDriver);
  EXPECT_FALSE(c.engine_max_active_blocks.has_value());
}

// Pushes the full ring refused used seqs of their own (the sender skips them before its next
// event): 2 drops after seq 0, so the device event is 3 and the kernels 4..7.
TEST(RegionRecoveryTest, RingDropsComeBeforeTheRecoveredSeqs) {
  TestRegion r(/*ring_capacity=*/4);
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  r.writer->PublishState({.seq_base = 1, .handled_pos = 0, .announced_devices = 0});
  for (uint64_t i = 0; i < 6; ++i) r.ring->TryPush(Launch(200 + i, k));
  ASSERT_EQ(r.ring->dropped(), 2u);
  const Recovered got = RecoverAll(r.bytes(), 0);
  ASSERT_EQ(got.result.error, RegionError::kNone) << got.result.message;
  EXPECT_EQ(got.seqs, (std::vector<uint64_t>{3, 4, 5, 6, 7}));
  EXPECT_EQ(got.result.end_seq, 8u);
  EXPECT_EQ(AsKernel(got.events[4]).correlation_id, 203u);
}

// The sender made the device event (1) and kernels 2 and 3 from the records at positions 0 and 1
// and handed them to the transport, which wrote lines up to seq 2 only; positions 2 and 3 wait
// in the ring. The log holds up to seq 2: recovery gives 3 from the journal, 4 and 5 from the
// ring, and no device event (the log has it).
TEST(RegionRecoveryTest, TheJournalGivesWhatTheSenderMadeAndNeverWrote) {
  TestRegion r;
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  r.writer->PublishState({.seq_base = 1, .handled_pos = 0, .announced_devices = 0});
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(r.ring->TryPush(Launch(300 + i, k)));
  r.writer->AnnounceDevice(0, 1, 1'732'000'000'000'000'300);
  r.writer->PublishState({.seq_base = 2, .handled_pos = 0, .announced_devices = 1});
  for (uint64_t seq = 2; seq <= 3; ++seq) {
    WireLaunchRecord record;
    uint64_t pos = 0;
    ASSERT_TRUE(r.ring->TryPeek(&record, &pos));
    r.writer->Commit(seq, pos, &record,
                     {.seq_base = seq + 1, .handled_pos = pos + 1, .announced_devices = 1});
    r.ring->Consume();
  }
  r.writer->ReleaseJournal(2);  // the line of seq 2 was written
  const Recovered got = RecoverAll(r.bytes(), /*after_seq=*/2);
  ASSERT_EQ(got.result.error, RegionError::kNone) << got.result.message;
  EXPECT_EQ(got.seqs, (std::vector<uint64_t>{3, 4, 5}));
  EXPECT_EQ(got.result.end_seq, 6u);
  ASSERT_EQ(got.events.size(), 3u);
  EXPECT_EQ(AsKernel(got.events[0]).correlation_id, 301u);
  EXPECT_EQ(AsKernel(got.events[1]).correlation_id, 302u);
  EXPECT_EQ(AsKernel(got.events[2]).correlation_id, 303u);

  // A log that lacks the device event too (its line was never written): it comes back with the
  // seq the sender gave it, and the kernel 2 from the journal's forgotten part does not.
  const Recovered all = RecoverAll(r.bytes(), /*after_seq=*/0);
  EXPECT_EQ(all.seqs, (std::vector<uint64_t>{1, 3, 4, 5}));
  EXPECT_TRUE(std::get<schema::OwnedDeviceEvent>(all.events[0]).recovered);
  EXPECT_EQ(std::get<schema::OwnedDeviceEvent>(all.events[0]).header.ts_ns,
            1'732'000'000'000'000'300);
}

// Killed between a journal entry's commit and the state's publication (and before the ring
// slot was freed): the entry's state is the newer one, so the record is made once, with the
// journal's seq, and the next record gets the seq after it.
TEST(RegionRecoveryTest, AKillBetweenTheJournalAndTheStateMakesNoDuplicate) {
  TestRegion r;
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  r.writer->AnnounceDevice(0, 1, 1);
  r.writer->PublishState({.seq_base = 2, .handled_pos = 0, .announced_devices = 1});
  ASSERT_TRUE(r.ring->TryPush(Launch(401, k)));
  ASSERT_TRUE(r.ring->TryPush(Launch(402, k)));
  WireLaunchRecord record;
  uint64_t pos = 0;
  ASSERT_TRUE(r.ring->TryPeek(&record, &pos));
  r.writer->Commit(2, pos, &record, {.seq_base = 3, .handled_pos = 1, .announced_devices = 1});
  // Undo the state's publication: the header's current state is the one before.
  r.header().state_version -= 1;
  const Recovered got = RecoverAll(r.bytes(), /*after_seq=*/1);
  ASSERT_EQ(got.result.error, RegionError::kNone) << got.result.message;
  EXPECT_EQ(got.seqs, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(AsKernel(got.events[0]).correlation_id, 401u);
  EXPECT_EQ(AsKernel(got.events[1]).correlation_id, 402u);
  EXPECT_EQ(got.result.end_seq, 4u);

  // The same, killed before the head moved past the committed entry.
  r.header().journal_head -= 1;
  const Recovered again = RecoverAll(r.bytes(), 1);
  EXPECT_EQ(again.seqs, (std::vector<uint64_t>{2, 3}));
}

// A launch whose callback had claimed its slot but not finished writing it never used a seq:
// counted as torn, and the records after it take consecutive seqs.
TEST(RegionRecoveryTest, ATornSlotIsCountedAndUsesNoSeq) {
  TestRegion r;
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  r.writer->PublishState({.seq_base = 1, .handled_pos = 0, .announced_devices = 0});
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(r.ring->TryPush(Launch(500 + i, k)));
  const uint64_t unpublished = 1;  // position 1: its turn word still says "free for position 1"
  std::memcpy(r.slot(1), &unpublished, sizeof(unpublished));
  const Recovered got = RecoverAll(r.bytes(), 0);
  ASSERT_EQ(got.result.error, RegionError::kNone);
  EXPECT_EQ(got.result.torn, 1u);
  EXPECT_EQ(got.seqs, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(AsKernel(got.events[1]).correlation_id, 500u);
  EXPECT_EQ(AsKernel(got.events[2]).correlation_id, 502u);
  EXPECT_EQ(got.result.end_seq, 4u);
}

// What cannot be made still used its seq: an api_error record (its names come from the
// driver), a function the full descriptor table does not hold. They are gaps, counted.
TEST(RegionRecoveryTest, RecordsThatCannotBeMadeKeepTheirSeqs) {
  TestRegion r(8, 8, /*function_capacity=*/1);
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  EXPECT_EQ(r.writer->AddFunction(Gemm64(), 0, H100()), kNoFunctionDescriptor);
  EXPECT_EQ(r.writer->functions_refused(), 1u);
  r.writer->PublishState({.seq_base = 1, .handled_pos = 0, .announced_devices = 0});
  ASSERT_TRUE(r.ring->TryPush(Launch(601, k)));
  ASSERT_TRUE(r.ring->TryPush(ApiError(602)));
  ASSERT_TRUE(r.ring->TryPush(Launch(603, kNoFunctionDescriptor)));
  ASSERT_TRUE(r.ring->TryPush(Launch(604, k)));
  const Recovered got = RecoverAll(r.bytes(), 0);
  ASSERT_EQ(got.result.error, RegionError::kNone);
  // device 1, kernel 2, api_error 3 (gap), undescribed launch 4 (gap), kernel 5.
  EXPECT_EQ(got.seqs, (std::vector<uint64_t>{1, 2, 5}));
  EXPECT_EQ(got.result.unrecoverable, 2u);
  EXPECT_EQ(got.result.end_seq, 6u);
}

// The sender had handled everything and the log holds it all: nothing to make, and the end is
// the seq after the last.
TEST(RegionRecoveryTest, NothingPendingGivesNothing) {
  TestRegion r;
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  r.writer->AnnounceDevice(0, 1, 1);
  r.writer->PublishState({.seq_base = 2, .handled_pos = 0, .announced_devices = 1});
  ASSERT_TRUE(r.ring->TryPush(Launch(701, k)));
  WireLaunchRecord record;
  uint64_t pos = 0;
  ASSERT_TRUE(r.ring->TryPeek(&record, &pos));
  r.writer->Commit(2, pos, &record, {.seq_base = 3, .handled_pos = 1, .announced_devices = 1});
  r.ring->Consume();
  r.writer->PublishState({.seq_base = 4, .handled_pos = 1, .announced_devices = 1});  // stats: 3
  const Recovered got = RecoverAll(r.bytes(), 3);
  ASSERT_EQ(got.result.error, RegionError::kNone);
  EXPECT_TRUE(got.seqs.empty());
  EXPECT_EQ(got.result.end_seq, 4u);
}

// A full journal forgets its oldest entry (counted); the rest is recovered.
TEST(RegionRecoveryTest, AFullJournalForgetsItsOldest) {
  TestRegion r(/*ring_capacity=*/8, /*journal_capacity=*/2);
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  r.writer->AnnounceDevice(0, 1, 1);
  r.writer->PublishState({.seq_base = 2, .handled_pos = 0, .announced_devices = 1});
  for (uint64_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(r.ring->TryPush(Launch(800 + i, k)));
    WireLaunchRecord record;
    uint64_t pos = 0;
    ASSERT_TRUE(r.ring->TryPeek(&record, &pos));
    r.writer->Commit(2 + i, pos, &record,
                     {.seq_base = 3 + i, .handled_pos = pos + 1, .announced_devices = 1});
    r.ring->Consume();
  }
  EXPECT_EQ(r.writer->journal_overwritten(), 1u);
  const Recovered got = RecoverAll(r.bytes(), 1);
  EXPECT_EQ(got.seqs, (std::vector<uint64_t>{3, 4}));  // 2 was forgotten: a gap
  EXPECT_EQ(got.result.end_seq, 5u);
}

// A forged state whose next seq is near the top of the range (only the tenant's own region can
// say so). Design point 3 gives the ring's records the seqs seq_base + drops, +1, ..., and the
// stream's end is one past every seq given (RecoveryResult::end_seq), a uint64_t: so the highest
// seq recovery may give is UINT64_MAX - 1 (its end, UINT64_MAX, still fits), and the ring's
// records end where the seqs do. Records below the state (the journal, announced devices) are
// recovered as with any state. Each case, worked out by hand with M = UINT64_MAX:
//
//  A. The device event was made (seq S-3), the journal holds kernels S-2 and S-1 (never
//     written), the state is {seq_base S, handled_pos 2}, positions 2 and 3 wait in the ring;
//     the log holds up to S-4:
//       S = 1000:  997 (device), 998, 999 (journal), 1000, 1001 (ring); end 1002
//       S = M-2:   M-5, M-4, M-3, then M-2 and M-1 from the ring; end M
//       S = M-1:   M-4, M-3, M-2, then M-1 (position 3 has no seq left); end M
//       S = M:     M-3, M-2, M-1 and nothing from the ring; end M
//  B. Nothing was sent after the state {seq_base S, handled_pos 0, no device announced} and two
//     launches wait in the ring: the device event first, then the kernels:
//       S = 1000:  1000 (device), 1001, 1002; end 1003
//       S = M-2:   M-2 (device), M-1; end M
//       S = M-1:   M-1 (device); end M
//       S = M:     nothing; end M
TEST(RegionRecoveryTest, AStateNearTheTopOfTheSeqsEndsTheRingWhereTheSeqsEnd) {
  constexpr uint64_t M = std::numeric_limits<uint64_t>::max();
  struct Case {
    uint64_t s;
    std::vector<uint64_t> a_seqs;
    uint64_t a_end;
    std::vector<uint64_t> b_seqs;
    uint64_t b_end;
  };
  const Case cases[] = {
      {1000, {997, 998, 999, 1000, 1001}, 1002, {1000, 1001, 1002}, 1003},
      {M - 2, {M - 5, M - 4, M - 3, M - 2, M - 1}, M, {M - 2, M - 1}, M},
      {M - 1, {M - 4, M - 3, M - 2, M - 1}, M, {M - 1}, M},
      {M, {M - 3, M - 2, M - 1}, M, {}, M},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("S = " + std::to_string(c.s));
    {  // A
      TestRegion r;
      const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
      for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(r.ring->TryPush(Launch(900 + i, k)));
      r.writer->AnnounceDevice(0, c.s - 3, 1'732'000'000'000'000'900);
      r.writer->PublishState({.seq_base = c.s - 2, .handled_pos = 0, .announced_devices = 1});
      for (uint64_t seq = c.s - 2; seq != c.s; ++seq) {
        WireLaunchRecord record;
        uint64_t pos = 0;
        ASSERT_TRUE(r.ring->TryPeek(&record, &pos));
        // seq + 1 is S at most: the forged top is in the state, not in this arithmetic.
        r.writer->Commit(seq, pos, &record,
                         {.seq_base = seq + 1, .handled_pos = pos + 1, .announced_devices = 1});
        r.ring->Consume();
      }
      const Recovered got = RecoverAll(r.bytes(), /*after_seq=*/c.s - 4);
      ASSERT_EQ(got.result.error, RegionError::kNone) << got.result.message;
      EXPECT_EQ(got.seqs, c.a_seqs);
      EXPECT_EQ(got.result.end_seq, c.a_end);
      for (uint64_t seq : got.seqs) EXPECT_GT(got.result.end_seq, seq);
      ASSERT_EQ(got.events.size(), c.a_seqs.size());
      // Below the state, as with any state: the device event and the journal's two kernels.
      const auto& device = std::get<schema::OwnedDeviceEvent>(got.events[0]);
      EXPECT_EQ(device.header.seq, c.s - 3);
      EXPECT_TRUE(device.recovered);
      EXPECT_EQ(AsKernel(got.events[1]).correlation_id, 900u);
      EXPECT_EQ(AsKernel(got.events[1]).header.seq, c.s - 2);
      EXPECT_EQ(AsKernel(got.events[2]).correlation_id, 901u);
      EXPECT_EQ(AsKernel(got.events[2]).header.seq, c.s - 1);
      // From the ring, in ring order, with the seqs there were.
      for (size_t i = 3; i < got.events.size(); ++i) {
        EXPECT_EQ(AsKernel(got.events[i]).correlation_id, 902u + (i - 3));
        EXPECT_EQ(AsKernel(got.events[i]).header.seq, c.s + (i - 3));
      }
      EXPECT_EQ(got.result.kernels, c.a_seqs.size() - 1);
      EXPECT_EQ(got.result.torn + got.result.unrecoverable + got.result.invalid, 0u);
    }
    {  // B
      TestRegion r;
      const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
      ASSERT_TRUE(r.ring->TryPush(Launch(950, k)));
      ASSERT_TRUE(r.ring->TryPush(Launch(951, k)));
      r.writer->PublishState({.seq_base = c.s, .handled_pos = 0, .announced_devices = 0});
      const Recovered got = RecoverAll(r.bytes(), /*after_seq=*/std::nullopt);
      ASSERT_EQ(got.result.error, RegionError::kNone) << got.result.message;
      EXPECT_EQ(got.seqs, c.b_seqs);
      EXPECT_EQ(got.result.end_seq, c.b_end);
      for (uint64_t seq : got.seqs) EXPECT_GT(got.result.end_seq, seq);
      ASSERT_EQ(got.events.size(), c.b_seqs.size());
      if (!got.events.empty()) {
        EXPECT_EQ(std::get<schema::OwnedDeviceEvent>(got.events[0]).header.seq, c.s);
      }
      for (size_t i = 1; i < got.events.size(); ++i) {
        EXPECT_EQ(AsKernel(got.events[i]).correlation_id, 950u + (i - 1));
      }
      EXPECT_EQ(got.result.torn + got.result.unrecoverable + got.result.invalid, 0u);
    }
  }
}

}  // namespace
}  // namespace cuflight::blackbox::testing
