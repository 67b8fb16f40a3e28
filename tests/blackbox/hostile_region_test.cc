// Regions a broken or hostile producer could hand the collector: each gives a clear error, or
// has its bad entries counted and skipped, and never makes the reader crash, read outside the
// region, loop without bound or emit anything out of order.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "region_test_util.h"

namespace cuflight::blackbox::testing {
namespace {

// A region with every part in use: two functions, a device announced, journal entries, records
// pending in the ring.
TestRegion FullRegion() {
  TestRegion r(/*ring_capacity=*/8, /*journal_capacity=*/4);
  const uint32_t k = r.writer->AddFunction(Kernel32(), 0, H100());
  const uint32_t g = r.writer->AddFunction(Gemm64(), 0, H100());
  r.writer->PublishState({.seq_base = 1, .handled_pos = 0, .announced_devices = 0});
  for (uint64_t i = 0; i < 6; ++i) r.ring->TryPush(Launch(900 + i, i % 2 == 0 ? k : g));
  r.writer->AnnounceDevice(0, 1, 1);
  r.writer->PublishState({.seq_base = 2, .handled_pos = 0, .announced_devices = 1});
  for (uint64_t seq = 2; seq <= 3; ++seq) {
    WireLaunchRecord record;
    uint64_t pos = 0;
    r.ring->TryPeek(&record, &pos);
    r.writer->Commit(seq, pos, &record,
                     {.seq_base = seq + 1, .handled_pos = pos + 1, .announced_devices = 1});
    r.ring->Consume();
  }
  return r;
}

template <typename T>
void Poke(TestRegion& r, uint64_t offset, T value) {
  std::memcpy(r.bytes().data() + offset, &value, sizeof(value));
}

RegionError ErrorOf(TestRegion& r, std::string* message = nullptr) {
  std::string m;
  const Recovered got = RecoverAll(r.bytes(), 0);
  EXPECT_TRUE(got.seqs.empty() || got.result.error == RegionError::kNone);
  if (message != nullptr) *message = got.result.message;
  return got.result.error;
}

TEST(HostileRegionTest, TheValidRegionRecovers) {
  TestRegion r = FullRegion();
  const Recovered got = RecoverAll(r.bytes(), 0);
  ASSERT_EQ(got.result.error, RegionError::kNone) << got.result.message;
  // device 1 (announced), kernels 2, 3 (journal), 4..7 (ring).
  EXPECT_EQ(got.seqs, (std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(got.result.invalid + got.result.torn + got.result.unrecoverable, 0u);
}

TEST(HostileRegionTest, HeaderErrors) {
  {
    TestRegion r = FullRegion();
    Poke<uint64_t>(r, offsetof(RegionHeader, magic), 0x1234);
    EXPECT_EQ(ErrorOf(r), RegionError::kBadMagic);
  }
  {
    TestRegion r = FullRegion();
    Poke<uint32_t>(r, offsetof(RegionHeader, version), 2);
    std::string message;
    EXPECT_EQ(ErrorOf(r, &message), RegionError::kBadVersion);
    EXPECT_NE(message.find("layout version 2"), std::string::npos) << message;
  }
  {
    TestRegion r = FullRegion();
    const Recovered got = RecoverAll(r.bytes().first(r.size - 4096), 0);
    EXPECT_EQ(got.result.error, RegionError::kTooSmall);
    EXPECT_EQ(RecoverAll(r.bytes().first(100), 0).result.error, RegionError::kTooSmall);
    EXPECT_EQ(RecoverAll({}, 0).result.error, RegionError::kTooSmall);
  }
  const auto bad_layout = [](auto poke) {
    TestRegion r = FullRegion();
    poke(r);
    std::string message;
    const RegionError e = ErrorOf(r, &message);
    EXPECT_EQ(e, RegionError::kBadLayout) << message;
    std::string check;
    EXPECT_EQ(CheckRegion(r.bytes(), &check), RegionError::kBadLayout);
    EXPECT_FALSE(check.empty());
  };
  bad_layout([](TestRegion& r) { Poke<uint32_t>(r, offsetof(RegionHeader, ring_capacity), 6); });
  bad_layout([](TestRegion& r) { Poke<uint32_t>(r, offsetof(RegionHeader, ring_capacity), 0); });
  bad_layout([](TestRegion& r) {
    Poke<uint32_t>(r, offsetof(RegionHeader, ring_capacity), 1u << 31);  // beyond the region
  });
  bad_layout([](TestRegion& r) { Poke<uint32_t>(r, offsetof(RegionHeader, ring_slot_bytes), 64); });
  bad_layout(
      [](TestRegion& r) { Poke<uint32_t>(r, offsetof(RegionHeader, journal_entry_bytes), 8); });
  bad_layout([](TestRegion& r) { Poke<uint32_t>(r, offsetof(RegionHeader, header_bytes), 64); });
  bad_layout([](TestRegion& r) {
    // The journal over the ring's slots.
    Poke<uint64_t>(r, offsetof(RegionHeader, journal_offset), r.header().ring_slots_offset);
  });
  bad_layout([](TestRegion& r) {
    Poke<uint64_t>(r, offsetof(RegionHeader, names_bytes), ~uint64_t{0} - 4096);  // wraps
  });
  bad_layout([](TestRegion& r) {
    Poke<uint64_t>(r, offsetof(RegionHeader, devices_offset), r.size);  // past the end
  });
  bad_layout([](TestRegion& r) {
    Poke<uint64_t>(r, offsetof(RegionHeader, ring_control_offset), 8);  // inside the header
  });
  bad_layout([](TestRegion& r) {
    Poke<uint64_t>(r, offsetof(RegionHeader, functions_offset), r.header().functions_offset + 8);
  });
  bad_layout([](TestRegion& r) { Poke<uint32_t>(r, offsetof(RegionHeader, device_capacity), 65); });
}

TEST(HostileRegionTest, LiveWordsThatCannotHold) {
  const auto bad_state = [](auto poke) {
    TestRegion r = FullRegion();
    poke(r);
    std::string message;
    EXPECT_EQ(ErrorOf(r, &message), RegionError::kBadState) << message;
    EXPECT_FALSE(message.empty());
  };
  bad_state([](TestRegion& r) { Poke<uint64_t>(r, offsetof(RegionHeader, journal_tail), 9); });
  bad_state([](TestRegion& r) {
    Poke<uint64_t>(r, offsetof(RegionHeader, journal_head), ~uint64_t{0});  // 2^64 entries
  });
  bad_state(
      [](TestRegion& r) { Poke<uint32_t>(r, offsetof(RegionHeader, functions_committed), 1000); });
  bad_state(
      [](TestRegion& r) { Poke<uint64_t>(r, offsetof(RegionHeader, names_committed), 1u << 20); });
  const auto control = [](TestRegion& r, uint32_t word, uint64_t value) {
    Poke<uint64_t>(r, r.header().ring_control_offset + word, value);
  };
  bad_state([&](TestRegion& r) { control(r, kRingEnqueueOffset, 1); });     // below consumed
  bad_state([&](TestRegion& r) { control(r, kRingEnqueueOffset, 1000); });  // > capacity ahead
  bad_state([&](TestRegion& r) { control(r, kRingDroppedOffset, ~uint64_t{0}); });  // seq wraps
  bad_state([](TestRegion& r) {
    // The current state claims records handled that were never claimed.
    const uint64_t v = r.header().state_version;
    Poke<uint64_t>(r,
                   offsetof(RegionHeader, seq_state) + (v & 1) * sizeof(SeqState) +
                       offsetof(SeqState, handled_pos),
                   1'000'000);
  });
}

// Bad entries are counted and skipped; the rest of the region is still recovered.
TEST(HostileRegionTest, BadEntriesAreCountedAndTheRestRecovered) {
  const auto ring_record = [](TestRegion& r, uint64_t pos) {
    return r.header().ring_slots_offset + (pos % 8) * kRingSlotBytes + kRingSlotRecordOffset;
  };
  const auto check = [](TestRegion& r, std::vector<uint64_t> seqs, uint64_t invalid,
                        uint64_t unrecoverable) {
    const Recovered got = RecoverAll(r.bytes(), 0);
    ASSERT_EQ(got.result.error, RegionError::kNone) << got.result.message;
    EXPECT_EQ(got.seqs, seqs);
    EXPECT_EQ(got.result.invalid, invalid);
    EXPECT_EQ(got.result.unrecoverable, unrecoverable);
  };
  {  // ring position 3 (seq 5): an api value no launch entry point has
    TestRegion r = FullRegion();
    Poke<uint8_t>(r, ring_record(r, 3) + offsetof(WireLaunchRecord, api), 200);
    check(r, {1, 2, 3, 4, 6, 7}, 1, 1);
  }
  {  // launch flags with a bit no flag has, a kind that does not exist
    TestRegion r = FullRegion();
    Poke<uint8_t>(r, ring_record(r, 2) + offsetof(WireLaunchRecord, launch_flags), 16);
    Poke<uint8_t>(r, ring_record(r, 4) + offsetof(WireLaunchRecord, kind), 7);
    check(r, {1, 2, 3, 5, 7}, 2, 2);
  }
  {  // a descriptor index past the table, a device out of range, a device without a descriptor
    TestRegion r = FullRegion();
    Poke<uint32_t>(r, ring_record(r, 2) + offsetof(WireLaunchRecord, function_desc), 7);
    Poke<int8_t>(r, ring_record(r, 3) + offsetof(WireLaunchRecord, device), 100);
    Poke<int8_t>(r, ring_record(r, 4) + offsetof(WireLaunchRecord, device), 5);
    check(r, {1, 2, 3, 7}, 3, 3);
  }
  {  // a descriptor whose names lie outside the names written, or on another device
    TestRegion r = FullRegion();
    const uint64_t f1 = r.header().functions_offset + sizeof(FunctionDescriptor);
    Poke<uint64_t>(r, f1 + offsetof(FunctionDescriptor, name_offset), 1u << 30);
    Poke<int32_t>(r, r.header().functions_offset + offsetof(FunctionDescriptor, device), 3);
    // Every record names one of the two: only the device event is left.
    check(r, {1}, 6, 6);
  }
  {  // a device descriptor whose name has no end
    TestRegion r = FullRegion();
    const uint64_t d0 = r.header().devices_offset;
    std::memset(r.bytes().data() + d0 + offsetof(DeviceDescriptor, name), 'x', 256);
    const Recovered got = RecoverAll(r.bytes(), 0);
    ASSERT_EQ(got.result.error, RegionError::kNone);
    EXPECT_TRUE(got.seqs.empty());  // no device: neither its event nor its kernels
  }
  {  // two journal entries with one seq; a journal seq the state says is not used yet
    TestRegion r = FullRegion();
    const uint64_t j1 = r.header().journal_offset + sizeof(JournalEntry);
    Poke<uint64_t>(r, j1 + offsetof(JournalEntry, seq), 2);
    check(r, {1, 2, 4, 5, 6, 7}, 1, 0);
    Poke<uint64_t>(r, j1 + offsetof(JournalEntry, seq), 50);
    check(r, {1, 2, 4, 5, 6, 7}, 1, 0);
  }
  {  // a journal entry not whole (the producer died writing it)
    TestRegion r = FullRegion();
    Poke<uint64_t>(r, r.header().journal_offset + offsetof(JournalEntry, commit), 0);
    const Recovered got = RecoverAll(r.bytes(), 0);
    EXPECT_EQ(got.seqs, (std::vector<uint64_t>{1, 3, 4, 5, 6, 7}));
    EXPECT_EQ(got.result.torn, 1u);
  }
}

// Names as long as the region allows, named by every record: recovery stops making lines at
// max_line_bytes each and max_total_bytes in all.
TEST(HostileRegionTest, HugeNamesAreBounded) {
  TestRegion r(/*ring_capacity=*/64, 4, 4, /*names_bytes=*/uint64_t{3} << 20);
  const std::string huge(size_t{1} << 20, 'k');  // longer than a line may be
  const std::string big(size_t{700} << 10, 'b');
  FunctionFacts f = Kernel32();
  f.name = huge;
  const uint32_t a = r.writer->AddFunction(f, 0, H100());
  f.name = big;
  const uint32_t b = r.writer->AddFunction(f, 0, H100());
  r.writer->PublishState({.seq_base = 1, .handled_pos = 0, .announced_devices = 0});
  for (uint64_t i = 0; i < 64; ++i) ASSERT_TRUE(r.ring->TryPush(Launch(i, i < 8 ? a : b)));
  RecoveryOptions options;
  options.after_seq = 0;
  options.max_total_bytes = uint64_t{8} << 20;
  uint64_t total = 0;
  uint64_t count = 0;
  const RecoveryResult result = Recover(r.bytes(), options, [&](uint64_t, std::string_view line) {
    total += line.size();
    ++count;
    EXPECT_LE(line.size(), options.max_line_bytes);
  });
  ASSERT_EQ(result.error, RegionError::kNone);
  EXPECT_LE(total, options.max_total_bytes);
  EXPECT_EQ(count, 1u + 11u);  // the device, then 11 lines of 700 KiB fit in 8 MiB
  EXPECT_EQ(result.unrecoverable, 8u + (56u - 11u));
}

// Random damage to a valid region: whatever the bytes, recovery returns, emits in increasing
// seq order above after_seq, lines ending in '\n', and an end beyond every seq it emitted.
TEST(HostileRegionTest, RandomDamageNeverBreaksTheReader) {
  std::mt19937_64 random(20261122);
  for (int round = 0; round < 3000; ++round) {
    TestRegion r = FullRegion();
    const int flips = 1 + static_cast<int>(random() % 16);
    for (int i = 0; i < flips; ++i) {
      // Mostly where the live words and entries are: the first pages.
      const uint64_t span = random() % 4 == 0 ? r.size : std::min<uint64_t>(r.size, 16384);
      r.bytes()[random() % span] = static_cast<uint8_t>(random());
    }
    RecoveryOptions options;
    options.after_seq = random() % 3 == 0 ? std::optional<uint64_t>() : random() % 6;
    uint64_t last = 0;
    bool any = false;
    const RecoveryResult result =
        Recover(r.bytes(), options, [&](uint64_t seq, std::string_view line) {
          ASSERT_TRUE(!any || seq > last) << round;
          ASSERT_TRUE(!options.after_seq || seq > *options.after_seq) << round;
          ASSERT_FALSE(line.empty());
          ASSERT_EQ(line.back(), '\n');
          any = true;
          last = seq;
        });
    if (result.error == RegionError::kNone && any) {
      EXPECT_GT(result.end_seq, last) << round;
    }
  }
}

}  // namespace
}  // namespace cuflight::blackbox::testing
