// The recovery the collector runs: through FdSource (pread of the producer's memfd, holes
// skipped) and a step at a time (RegionRecovery::Step). It must emit exactly what one call of
// Recover over the same bytes emits, whatever the step's budget; skip what was never written
// without reading it or allocating it; and end on any live words.
#include "cuflight/blackbox/region_source.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "region_test_util.h"

namespace cuflight::blackbox::testing {
namespace {

using Lines = std::vector<std::pair<uint64_t, std::string>>;

// A region with every part in use: two functions, a device announced, journal entries (one of
// them forgotten), records pending in the ring and an api_error among them.
TestRegion BusyRegion() {
  TestRegion r(/*ring_capacity=*/16, /*journal_capacity=*/4);
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  const uint32_t g = r.writer->AddFunction(Gemm64(), 0, H100());
  r.writer->PublishState({.seq_base = 1, .handled_pos = 0, .announced_devices = 0});
  for (uint64_t i = 0; i < 12; ++i) {
    r.ring->TryPush(i == 9 ? ApiError(900 + i) : Launch(900 + i, i % 2 == 0 ? k : g));
  }
  r.writer->AnnounceDevice(0, 1, 1);
  r.writer->PublishState({.seq_base = 2, .handled_pos = 0, .announced_devices = 1});
  for (uint64_t seq = 2; seq <= 5; ++seq) {
    WireLaunchRecord record;
    uint64_t pos = 0;
    r.ring->TryPeek(&record, &pos);
    r.writer->Commit(seq, pos, &record,
                     {.seq_base = seq + 1, .handled_pos = pos + 1, .announced_devices = 1});
    r.ring->Consume();
  }
  r.writer->ReleaseJournal(2);
  return r;
}

struct Stepping {
  RecoveryResult result;
  Lines lines;
  uint64_t steps = 0;
};

Stepping Stepped(RegionSource& source, const RegionRecovery::Budget& budget, uint64_t max_steps) {
  Stepping run;
  RecoveryOptions options;
  options.after_seq = 1;
  RegionRecovery recovery(&source, options);
  const RegionRecovery::Emit emit = [&](uint64_t seq, std::string_view line) {
    run.lines.emplace_back(seq, std::string(line));
  };
  bool done = false;
  while (!done && run.steps < max_steps) {
    ++run.steps;
    done = recovery.Step(budget, emit);
  }
  EXPECT_TRUE(done) << "not over after " << max_steps << " steps";
  run.result = recovery.result();
  return run;
}

void ExpectSameResult(const RecoveryResult& a, const RecoveryResult& b) {
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.kernels, b.kernels);
  EXPECT_EQ(a.devices, b.devices);
  EXPECT_EQ(a.torn, b.torn);
  EXPECT_EQ(a.unrecoverable, b.unrecoverable);
  EXPECT_EQ(a.invalid, b.invalid);
  EXPECT_EQ(a.end_seq, b.end_seq);
}

// A memfd holding `bytes`, sealed as a producer's is.
int MemfdOf(std::span<const uint8_t> bytes) {
  const int fd = memfd_create("region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(pwrite(fd, bytes.data(), bytes.size(), 0), ssize_t(bytes.size()));
  EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  return fd;
}

TEST(RegionSourceTest, SteppedRecoveryEmitsWhatOneCallDoes) {
  TestRegion r = BusyRegion();
  RecoveryOptions options;
  options.after_seq = 1;
  Lines whole;
  const RecoveryResult one = Recover(r.bytes(), options, [&](uint64_t seq, std::string_view line) {
    whole.emplace_back(seq, std::string(line));
  });
  ASSERT_EQ(one.error, RegionError::kNone) << one.message;
  // Seq 1 (the device) is at or below after_seq; seq 2 was released from the journal (its line
  // written), 3, 4 and 5 are journaled; the ring's positions 4..11 (4 handled) get 6..13, the
  // api_error at position 9 (seq 11) lost.
  std::vector<uint64_t> seqs;
  for (const auto& [seq, line] : whole) seqs.push_back(seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{3, 4, 5, 6, 7, 8, 9, 10, 12, 13}));
  EXPECT_EQ(one.unrecoverable, 1u);

  const int fd = MemfdOf(r.bytes());
  for (const RegionRecovery::Budget budget :
       {RegionRecovery::Budget{1, 1}, RegionRecovery::Budget{3, 500}, RegionRecovery::Budget{}}) {
    SCOPED_TRACE(budget.entries);
    SpanSource span(r.bytes());
    const Stepping in_memory = Stepped(span, budget, 1000);
    EXPECT_EQ(in_memory.lines, whole);
    ExpectSameResult(in_memory.result, one);
    FdSource file(fd, r.bytes().size());
    const Stepping from_fd = Stepped(file, budget, 1000);
    EXPECT_EQ(from_fd.lines, whole);
    ExpectSameResult(from_fd.result, one);
    if (budget.entries == 1) {  // one entry per step: the steps are at least the entries
      EXPECT_GE(from_fd.steps, 16u);
    }
  }
  close(fd);
}

// Journal indices at the very top of uint64_t: the entry at 2^64 - 1 is looked at and the
// reading ends (it did not when the next index wrapped to 0).
TEST(RegionSourceTest, JournalIndicesAtTheTopOfTheRangeEnd) {
  TestRegion r = BusyRegion();
  r.header().journal_tail = UINT64_MAX;
  r.header().journal_head = UINT64_MAX;
  SpanSource span(r.bytes());
  const Stepping run = Stepped(span, RegionRecovery::Budget{1, 1}, 1000);
  EXPECT_EQ(run.result.error, RegionError::kNone) << run.result.message;
}

uint64_t AllocatedBytes(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

// A region whose producer wrote its header, one ring slot, a function and its device, and whose
// header claims all of its 65,536-slot (8 MiB) ring in use: the slots in holes are counted torn
// in runs, without being read, and no page of the memfd is allocated by reading it.
TEST(RegionSourceTest, HolesAreSkippedNotRead) {
  RegionOptions o;
  o.ring_capacity = 65536;
  o.journal_capacity = 2;
  o.function_capacity = 16;
  o.names_bytes = 4096;
  std::string error;
  auto region = RegionWriter::Create(o, &error);
  ASSERT_NE(region, nullptr) << error;
  const uint32_t k = region->AddFunction(Kernel32(), 0, H100());
  region->AnnounceDevice(0, 1, 1);
  region->PublishState({.seq_base = 2, .handled_pos = 0, .announced_devices = 1});
  const auto& h = *reinterpret_cast<const RegionHeader*>(region->bytes().data());
  uint8_t slot[kRingSlotBytes] = {};
  const uint64_t turn = 1;  // position 0, committed (region_layout.h design point 4)
  const WireLaunchRecord record = Launch(900, k);
  std::memcpy(slot, &turn, sizeof(turn));
  std::memcpy(slot + kRingSlotRecordOffset, &record, sizeof(record));
  const int fd = region->fd();
  ASSERT_EQ(pwrite(fd, slot, sizeof(slot), static_cast<off_t>(h.ring_slots_offset)),
            ssize_t(sizeof(slot)));
  const uint64_t claimed = o.ring_capacity;
  ASSERT_EQ(pwrite(fd, &claimed, sizeof(claimed),
                   static_cast<off_t>(h.ring_control_offset + kRingEnqueueOffset)),
            ssize_t(sizeof(claimed)));
  const uint64_t allocated = AllocatedBytes(fd);
  EXPECT_LT(allocated, o.ring_capacity * kRingSlotBytes / 8);

  FdSource source(fd, region->bytes().size());
  const Stepping run = Stepped(source, RegionRecovery::Budget{16, 1 << 20}, 1000);
  ASSERT_EQ(run.result.error, RegionError::kNone) << run.result.message;
  EXPECT_EQ(run.result.kernels, 1u);  // seq 2
  EXPECT_EQ(run.result.torn, claimed - 1);
  EXPECT_EQ(run.result.end_seq, 3u);
  ASSERT_EQ(run.lines.size(), 1u);
  EXPECT_EQ(run.lines[0].first, 2u);
  // Read: a few 64 KiB windows (the header's, the descriptors' and names'), not the 8 MiB ring.
  EXPECT_LT(source.bytes_read(), uint64_t{1} << 20);
  EXPECT_EQ(AllocatedBytes(fd), allocated);
}

}  // namespace
}  // namespace cuflight::blackbox::testing
