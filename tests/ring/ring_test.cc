#include "cuflight/inject/ring.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace cuflight::inject {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The size of a launch record, with a payload derived from (producer, seq) so that a torn or
// misplaced copy shows.
struct Record {
  uint32_t producer = 0;
  uint32_t check = 0;
  uint64_t seq = 0;
  uint64_t fill[22] = {};
};
static_assert(sizeof(Record) == 192);

Record Make(uint32_t producer, uint64_t seq) {
  Record r;
  r.producer = producer;
  r.seq = seq;
  for (uint64_t i = 0; i < 22; ++i) r.fill[i] = seq * 1000003 + producer * 7919 + i;
  r.check = static_cast<uint32_t>(seq ^ (uint64_t{producer} << 24));
  return r;
}

bool Intact(const Record& r) {
  if (r.check != static_cast<uint32_t>(r.seq ^ (uint64_t{r.producer} << 24))) return false;
  for (uint64_t i = 0; i < 22; ++i) {
    if (r.fill[i] != r.seq * 1000003 + r.producer * 7919 + i) return false;
  }
  return true;
}

// Polls `done` until it holds or `limit` passes.
template <typename Pred>
bool WaitUntil(Pred done, Clock::duration limit = seconds(20)) {
  const Clock::time_point deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// The scheduler state letter of one of this process's threads ('S': sleeping in the kernel).
char ThreadState(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
}

pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

TEST(MpscRingTest, CapacityIsRoundedUpToAPowerOfTwo) {
  EXPECT_EQ(MpscRing<Record>(0).capacity(), 2u);
  EXPECT_EQ(MpscRing<Record>(1).capacity(), 2u);
  EXPECT_EQ(MpscRing<Record>(2).capacity(), 2u);
  EXPECT_EQ(MpscRing<Record>(3).capacity(), 4u);
  EXPECT_EQ(MpscRing<Record>(100).capacity(), 128u);
  EXPECT_EQ(MpscRing<Record>(16384).capacity(), 16384u);
}

TEST(MpscRingTest, SmallAndOverAlignedRecords) {
  MpscRing<uint64_t> small(8);
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(small.TryPush(i * 3));
  uint64_t v = 0;
  for (uint64_t i = 0; i < 8; ++i) {
    ASSERT_TRUE(small.TryPop(&v));
    EXPECT_EQ(v, i * 3);
  }

  struct alignas(256) Wide {
    uint64_t value;
  };
  MpscRing<Wide> wide(4);
  ASSERT_TRUE(wide.TryPush(Wide{7}));
  ASSERT_TRUE(wide.TryPush(Wide{8}));
  Wide w{};
  ASSERT_TRUE(wide.TryPop(&w));
  EXPECT_EQ(w.value, 7u);
  ASSERT_TRUE(wide.TryPop(&w));
  EXPECT_EQ(w.value, 8u);
}

TEST(MpscRingTest, SingleThreadFifo) {
  MpscRing<Record> ring(64);
  for (uint64_t i = 0; i < 50; ++i) ASSERT_TRUE(ring.TryPush(Make(1, i)));
  EXPECT_EQ(ring.SizeApprox(), 50u);
  Record r;
  for (uint64_t i = 0; i < 50; ++i) {
    ASSERT_TRUE(ring.TryPop(&r));
    EXPECT_EQ(r.seq, i);
    EXPECT_TRUE(Intact(r));
  }
  EXPECT_FALSE(ring.TryPop(&r));
  EXPECT_EQ(ring.SizeApprox(), 0u);
  EXPECT_EQ(ring.dropped(), 0u);
}

// TryPeek leaves the record where it is (its slot stays taken) until Consume frees it.
TEST(MpscRingTest, PeekLeavesTheRecordInItsSlotUntilConsumed) {
  MpscRing<Record> ring(4);
  Record r;
  uint64_t pos = 99;
  EXPECT_FALSE(ring.TryPeek(&r, &pos));
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(ring.TryPush(Make(3, i)));
  for (int look = 0; look < 2; ++look) {
    ASSERT_TRUE(ring.TryPeek(&r, &pos));
    EXPECT_EQ(pos, 0u);
    EXPECT_EQ(r.seq, 0u);
  }
  EXPECT_FALSE(ring.TryPush(Make(3, 4)));  // still full: the peeked record holds its slot
  EXPECT_EQ(ring.popped(), 0u);
  ring.Consume();
  EXPECT_EQ(ring.popped(), 1u);
  EXPECT_TRUE(ring.TryPush(Make(3, 4)));
  for (uint64_t i = 1; i <= 4; ++i) {
    ASSERT_TRUE(ring.TryPeek(&r, &pos));
    EXPECT_EQ(pos, i);
    EXPECT_EQ(r.seq, i);
    EXPECT_TRUE(Intact(r));
    ring.Consume();
  }
  EXPECT_FALSE(ring.TryPeek(&r));
  EXPECT_EQ(ring.dropped(), 1u);
}

// Design point 10: records peeked at later positions stay in their slots, taking room, until
// ConsumeTo frees every one below its position at once.
TEST(MpscRingTest, PeekAtLaterPositionsAndConsumeToFreesThemAtOnce) {
  MpscRing<Record> ring(8);
  Record r;
  EXPECT_FALSE(ring.TryPeekAt(0, &r));  // nothing committed yet
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(ring.TryPush(Make(5, i)));
  for (uint64_t pos = 0; pos < 5; ++pos) {
    ASSERT_TRUE(ring.TryPeekAt(pos, &r));
    EXPECT_EQ(r.seq, pos);
    EXPECT_TRUE(Intact(r));
  }
  EXPECT_EQ(ring.popped(), 0u);
  EXPECT_EQ(ring.SizeApprox(), 8u);
  EXPECT_FALSE(ring.TryPush(Make(5, 8)));  // peeked, not freed: still full
  ring.ConsumeTo(5);
  EXPECT_EQ(ring.popped(), 5u);
  EXPECT_EQ(ring.SizeApprox(), 3u);
  ring.ConsumeTo(3);  // below the consumer position: nothing
  EXPECT_EQ(ring.popped(), 5u);
  for (uint64_t i = 9; i < 14; ++i) ASSERT_TRUE(ring.TryPush(Make(5, i)));  // 5 slots freed
  EXPECT_FALSE(ring.TryPush(Make(5, 14)));
  // Positions 5..12 hold 5, 6, 7 then 9..13 (8 and 14 were dropped); 13 is not committed.
  const uint64_t expected[] = {5, 6, 7, 9, 10, 11, 12, 13};
  for (uint64_t pos = 5; pos < 13; ++pos) {
    ASSERT_TRUE(ring.TryPeekAt(pos, &r)) << pos;
    EXPECT_EQ(r.seq, expected[pos - 5]);
    EXPECT_TRUE(Intact(r));
  }
  EXPECT_FALSE(ring.TryPeekAt(13, &r));
  // TryPeek still sees the oldest record not freed.
  uint64_t pos = 0;
  ASSERT_TRUE(ring.TryPeek(&r, &pos));
  EXPECT_EQ(pos, 5u);
  ring.ConsumeTo(13);
  EXPECT_EQ(ring.SizeApprox(), 0u);
  EXPECT_FALSE(ring.TryPeek(&r));
  EXPECT_EQ(ring.dropped(), 2u);
}

// Producers blocking on a ring the consumer frees in batches of 32 (the sender thread's way):
// every record arrives once, in each producer's order, none dropped.
TEST(MpscRingTest, BlockPolicyWithABatchFreeingConsumerLosesNothing) {
  constexpr uint32_t kProducers = 3;
  constexpr uint64_t kPerProducer = 100000;
  constexpr uint64_t kBatch = 32;
  MpscRing<Record> ring(64);
  std::atomic<uint32_t> done{0};
  std::vector<int64_t> last(kProducers, -1);
  uint64_t got = 0, bad = 0;
  std::thread consumer([&] {
    uint64_t pos = ring.popped();
    uint64_t held = 0;
    Record r;
    for (;;) {
      const bool finished = done.load(std::memory_order_acquire) == kProducers;
      bool any = false;
      while (ring.TryPeekAt(pos, &r)) {
        any = true;
        ++got;
        if (!Intact(r) || r.producer >= kProducers ||
            static_cast<int64_t>(r.seq) != last[r.producer] + 1) {
          ++bad;
        } else {
          last[r.producer] = static_cast<int64_t>(r.seq);
        }
        ++pos;
        if (++held == kBatch) {
          ring.ConsumeTo(pos);
          held = 0;
        }
      }
      ring.ConsumeTo(pos);
      held = 0;
      if (finished && !any) break;
      if (!any) std::this_thread::yield();
    }
  });
  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        ASSERT_TRUE(ring.Push(Make(p, i), env::OnFull::kBlock)) << p << " " << i;
      }
      done.fetch_add(1, std::memory_order_release);
    });
  }
  for (std::thread& t : producers) t.join();
  consumer.join();
  EXPECT_EQ(got, kProducers * kPerProducer);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(ring.dropped(), 0u);
  for (uint32_t p = 0; p < kProducers; ++p) EXPECT_EQ(last[p], int64_t{kPerProducer} - 1);
}

// Over caller memory the ring keeps its words where Storage's layout says: a reader of the raw
// bytes (the collector reading a producer's black box) finds the positions, the drop count, each
// slot's turn word (position + 1 once committed, position + capacity once freed) and the record
// 8 bytes into its slot.
TEST(MpscRingTest, OverCallerStorageTheWordsLieWhereTheLayoutSays) {
  using Ring = MpscRing<Record>;
  static_assert(sizeof(Ring::Control) == 512 && alignof(Ring::Control) == 128);
  static_assert(sizeof(Ring::Slot) == 256 && offsetof(Ring::Slot, data) == 8);
  alignas(128) static unsigned char control[512];
  alignas(64) static unsigned char slots[8 * 256];
  std::memset(control, 0xAB, sizeof(control));  // not initialised: the ring constructs its words
  std::memset(slots, 0xCD, sizeof(slots));
  Ring ring(8, Ring::Storage{control, slots});
  const auto word = [](const unsigned char* at) {
    uint64_t v = 0;
    std::memcpy(&v, at, sizeof(v));
    return v;
  };
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(ring.TryPush(Make(5, i)));
  EXPECT_FALSE(ring.TryPush(Make(5, 8)));
  Record r;
  ASSERT_TRUE(ring.TryPop(&r));
  ASSERT_TRUE(ring.TryPop(&r));
  EXPECT_EQ(word(control + 0), 8u);    // claimed
  EXPECT_EQ(word(control + 128), 2u);  // consumed
  EXPECT_EQ(word(control + 384), 1u);  // dropped
  EXPECT_EQ(word(slots + 0 * 256), 0u + 8);  // freed for the next lap: position 0 + capacity
  EXPECT_EQ(word(slots + 1 * 256), 1u + 8);
  for (uint64_t i = 2; i < 8; ++i) {
    EXPECT_EQ(word(slots + i * 256), i + 1) << i;  // committed, not consumed
    Record raw;
    std::memcpy(&raw, slots + i * 256 + 8, sizeof(raw));
    EXPECT_EQ(raw.seq, i);
    EXPECT_TRUE(Intact(raw));
  }
  for (uint64_t i = 2; i < 8; ++i) {
    ASSERT_TRUE(ring.TryPop(&r));
    EXPECT_EQ(r.seq, i);
  }
}

TEST(MpscRingTest, FullAndEmptyEdges) {
  MpscRing<Record> ring(8);
  Record r;
  EXPECT_FALSE(ring.TryPop(&r));  // empty from the start
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(ring.TryPush(Make(0, i)));
  EXPECT_EQ(ring.SizeApprox(), 8u);
  EXPECT_FALSE(ring.TryPush(Make(0, 8)));
  EXPECT_FALSE(ring.Push(Make(0, 8), env::OnFull::kDrop));
  EXPECT_EQ(ring.dropped(), 2u);

  ASSERT_TRUE(ring.TryPop(&r));  // one free slot: exactly one more push fits
  EXPECT_EQ(r.seq, 0u);
  EXPECT_TRUE(ring.TryPush(Make(0, 8)));
  EXPECT_FALSE(ring.TryPush(Make(0, 9)));
  EXPECT_EQ(ring.dropped(), 3u);

  for (uint64_t i = 1; i <= 8; ++i) {
    ASSERT_TRUE(ring.TryPop(&r));
    EXPECT_EQ(r.seq, i);
  }
  EXPECT_FALSE(ring.TryPop(&r));
  EXPECT_EQ(ring.SizeApprox(), 0u);
}

TEST(MpscRingTest, WrapsAroundManyTimes) {
  MpscRing<Record> ring(4);
  uint64_t next_push = 0;
  uint64_t next_pop = 0;
  Record r;
  for (int round = 0; round < 100000; ++round) {
    const int batch = 1 + round % 4;  // 1..capacity records in flight
    for (int i = 0; i < batch; ++i) ASSERT_TRUE(ring.TryPush(Make(2, next_push++)));
    for (int i = 0; i < batch; ++i) {
      ASSERT_TRUE(ring.TryPop(&r));
      ASSERT_EQ(r.seq, next_pop++);
      ASSERT_TRUE(Intact(r));
    }
    ASSERT_FALSE(ring.TryPop(&r));
  }
  EXPECT_EQ(next_pop, 250000u);  // 25000 * (1 + 2 + 3 + 4)
  EXPECT_EQ(ring.high_water(), 4u);
  EXPECT_EQ(ring.dropped(), 0u);
}

TEST(MpscRingTest, HighWaterFollowsThePeak) {
  MpscRing<Record> ring(16);
  Record r;
  EXPECT_EQ(ring.high_water(), 0u);
  for (uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(ring.TryPush(Make(0, i)));
  EXPECT_EQ(ring.high_water(), 5u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ring.TryPop(&r));
  ASSERT_TRUE(ring.TryPush(Make(0, 5)));  // occupancy 3: the mark stays
  EXPECT_EQ(ring.high_water(), 5u);
  for (uint64_t i = 6; i < 10; ++i) ASSERT_TRUE(ring.TryPush(Make(0, i)));  // occupancy 7
  EXPECT_EQ(ring.high_water(), 7u);
  while (ring.TryPush(Make(0, 0))) {
  }
  EXPECT_EQ(ring.high_water(), 16u);
  EXPECT_EQ(ring.dropped(), 1u);
  while (ring.TryPop(&r)) {
  }
  EXPECT_EQ(ring.high_water(), 16u);  // a peak, not the current size
}

// 8 producers x 200,000 records into a small ring (drops and wraparound guaranteed), one consumer.
TEST(MpscRingTest, ManyProducersEveryRecordOnceInOrder) {
  constexpr uint32_t kProducers = 8;
  constexpr uint64_t kPerProducer = 200000;
  MpscRing<Record> ring(1024);

  std::vector<std::vector<uint8_t>> pushed(kProducers, std::vector<uint8_t>(kPerProducer, 0));
  std::vector<uint64_t> ok(kProducers, 0);
  std::vector<uint64_t> failed(kProducers, 0);
  std::atomic<uint32_t> producers_done{0};

  std::vector<std::vector<uint8_t>> popped(kProducers, std::vector<uint8_t>(kPerProducer, 0));
  std::vector<int64_t> last_seq(kProducers, -1);
  uint64_t popped_total = 0;
  uint64_t duplicates = 0, out_of_order = 0, torn = 0;
  std::thread consumer([&] {
    Record r;
    for (;;) {
      const bool finished = producers_done.load(std::memory_order_acquire) == kProducers;
      bool any = false;
      while (ring.TryPop(&r)) {
        any = true;
        ++popped_total;
        if (!Intact(r) || r.producer >= kProducers || r.seq >= kPerProducer) {
          ++torn;
          continue;
        }
        if (popped[r.producer][r.seq]++ != 0) ++duplicates;
        if (static_cast<int64_t>(r.seq) <= last_seq[r.producer]) ++out_of_order;
        last_seq[r.producer] = static_cast<int64_t>(r.seq);
      }
      if (finished && !any) break;  // every push completed before `finished` was read
      if (!any) std::this_thread::yield();
    }
  });

  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        if (ring.TryPush(Make(p, i))) {
          pushed[p][i] = 1;
          ++ok[p];
        } else {
          ++failed[p];
          std::this_thread::yield();  // lets the consumer run: 9 threads may share 2 cores
        }
      }
      producers_done.fetch_add(1, std::memory_order_release);
    });
  }
  for (std::thread& t : producers) t.join();
  consumer.join();

  uint64_t ok_total = 0, failed_total = 0;
  for (uint32_t p = 0; p < kProducers; ++p) {
    EXPECT_EQ(ok[p] + failed[p], kPerProducer) << "producer " << p;
    EXPECT_EQ(pushed[p], popped[p]) << "producer " << p << ": popped set != pushed set";
    ok_total += ok[p];
    failed_total += failed[p];
  }
  EXPECT_EQ(torn, 0u);
  EXPECT_EQ(duplicates, 0u);
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_EQ(popped_total, ok_total);
  EXPECT_EQ(ok_total + failed_total, kProducers * kPerProducer);
  EXPECT_EQ(ring.dropped(), failed_total);
  EXPECT_LE(ring.high_water(), ring.capacity());
  EXPECT_GT(ring.high_water(), 0u);
  if (failed_total > 0) {
    EXPECT_EQ(ring.high_water(), ring.capacity());  // a drop means the ring was full
  }
  Record r;
  EXPECT_FALSE(ring.TryPop(&r));
}

// OnFull::kBlock with a consumer much slower than the producers: nothing is lost.
TEST(MpscRingTest, BlockPolicyWithSlowConsumerLosesNothing) {
  constexpr uint32_t kProducers = 4;
  constexpr uint64_t kPerProducer = 20000;
  MpscRing<Record> ring(64);
  std::atomic<uint64_t> push_failures{0};

  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        if (!ring.Push(Make(p, i), env::OnFull::kBlock)) push_failures.fetch_add(1);
      }
    });
  }

  std::vector<uint64_t> next(kProducers, 0);
  uint64_t popped = 0, bad = 0;
  Record r;
  const Clock::time_point deadline = Clock::now() + seconds(40);
  while (popped < kProducers * kPerProducer && Clock::now() < deadline) {
    if (!ring.TryPop(&r)) {
      std::this_thread::yield();
      continue;
    }
    if (r.producer >= kProducers || r.seq != next[r.producer] || !Intact(r)) ++bad;
    if (r.producer < kProducers) next[r.producer] = r.seq + 1;
    ++popped;
    if (popped % 16 == 0) std::this_thread::yield();  // slow: producers keep finding it full
  }
  ring.Close();  // only matters if the loop above gave up
  for (std::thread& t : producers) t.join();

  EXPECT_EQ(popped, kProducers * kPerProducer);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(push_failures.load(), 0u);
  EXPECT_EQ(ring.dropped(), 0u);
  EXPECT_FALSE(ring.TryPop(&r));
}

// Design point 8: a kBlock push gives up on a consumer that stands still for the stall limit,
// later pushes fail at once while it still stands still, and the first pop ends the stall.
TEST(MpscRingTest, BlockPolicyGivesUpOnAConsumerThatStandsStill) {
  MpscRing<Record> ring(4, milliseconds(100));
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(ring.TryPush(Make(0, i)));

  Clock::time_point start = Clock::now();
  EXPECT_FALSE(ring.Push(Make(1, 0), env::OnFull::kBlock));
  const auto first = Clock::now() - start;
  EXPECT_GE(first, milliseconds(100));
  EXPECT_LT(first, milliseconds(900));
  EXPECT_EQ(ring.dropped(), 1u);

  start = Clock::now();
  EXPECT_FALSE(ring.Push(Make(1, 1), env::OnFull::kBlock));  // still stalled: no second wait
  EXPECT_LT(Clock::now() - start, milliseconds(50));
  EXPECT_EQ(ring.dropped(), 2u);

  Record r;
  ASSERT_TRUE(ring.TryPop(&r));  // the consumer moves: the stall is over
  EXPECT_TRUE(ring.Push(Make(1, 2), env::OnFull::kBlock));
  EXPECT_FALSE(ring.closed());
}

// A consumer that is slow but moves (one pop every 60 ms, under the 100 ms stall limit) is
// waited for: nothing is dropped however long the producer waits in all.
TEST(MpscRingTest, BlockPolicyWaitsForASlowConsumerThatMoves) {
  MpscRing<Record> ring(4, milliseconds(100));
  std::atomic<bool> done{false};
  std::thread consumer([&] {
    Record r;
    while (!done.load()) {
      std::this_thread::sleep_for(milliseconds(60));
      ring.TryPop(&r);
    }
  });
  const Clock::time_point start = Clock::now();
  int pushed = 0;
  for (uint64_t i = 0; i < 8; ++i) pushed += ring.Push(Make(0, i), env::OnFull::kBlock) ? 1 : 0;
  const auto waited = Clock::now() - start;
  done.store(true);
  consumer.join();
  EXPECT_EQ(pushed, 8);
  EXPECT_EQ(ring.dropped(), 0u);
  EXPECT_GE(waited, milliseconds(200));  // 4 pushes waited for ~60 ms each: longer than 100 ms
}

TEST(MpscRingTest, CloseReleasesBlockedProducers) {
  constexpr int kBlocked = 3;
  MpscRing<Record> ring(4);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(ring.TryPush(Make(0, i)));

  std::atomic<int> started{0};
  std::atomic<int> returned{0};
  std::atomic<int> returned_true{0};
  std::vector<std::thread> producers;
  for (int p = 1; p <= kBlocked; ++p) {
    producers.emplace_back([&, p] {
      started.fetch_add(1);
      if (ring.Push(Make(static_cast<uint32_t>(p), 100), env::OnFull::kBlock)) {
        returned_true.fetch_add(1);
      }
      returned.fetch_add(1);
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return started.load() == kBlocked; }));
  EXPECT_EQ(returned.load(), 0);  // the ring is full and nobody pops: they wait

  ring.Close();
  const bool released = WaitUntil([&] { return returned.load() == kBlocked; });
  EXPECT_TRUE(released) << "Close() did not release the blocked producers";
  Record r;
  if (!released) {
    while (returned.load() < kBlocked) ring.TryPop(&r);  // free them so the test can end
  }
  for (std::thread& t : producers) t.join();

  EXPECT_EQ(returned_true.load(), 0);
  EXPECT_EQ(ring.dropped(), static_cast<uint64_t>(kBlocked));
  EXPECT_TRUE(ring.closed());
  EXPECT_FALSE(ring.TryPush(Make(0, 4)));  // closed: even with room, no push succeeds
  EXPECT_EQ(ring.dropped(), static_cast<uint64_t>(kBlocked) + 1);

  for (uint64_t i = 0; i < 4; ++i) {  // what was in the ring is still there
    ASSERT_TRUE(ring.TryPop(&r));
    EXPECT_EQ(r.seq, i);
  }
  EXPECT_FALSE(ring.TryPush(Make(0, 5)));
  EXPECT_FALSE(ring.TryPop(&r));
}

TEST(MpscRingTest, ConsumerWaitTimesOutWhenNothingHappens) {
  MpscRing<Record> ring(64);
  const Clock::time_point start = Clock::now();
  ring.ConsumerWait(milliseconds(30));
  EXPECT_GE(Clock::now() - start, milliseconds(30));
  ring.ConsumerWait(std::chrono::nanoseconds(0));  // returns at once
}

// Runs ConsumerWait(timeout) on a thread; `act` runs once that thread sleeps in the kernel.
// Returns how long the wait lasted.
template <typename Act>
Clock::duration ParkedWait(MpscRing<Record>* ring, Clock::duration timeout, Act act) {
  std::atomic<pid_t> tid{0};
  std::atomic<bool> woke{false};
  Clock::duration waited{};
  std::thread consumer([&] {
    tid.store(CurrentTid());
    const Clock::time_point start = Clock::now();
    ring->ConsumerWait(timeout);
    waited = Clock::now() - start;
    woke.store(true);
  });
  EXPECT_TRUE(WaitUntil([&] { return tid.load() != 0 && ThreadState(tid.load()) == 'S'; }))
      << "the consumer never went to sleep";
  act();
  consumer.join();
  return waited;
}

TEST(MpscRingTest, ProducerWakesParkedConsumerAtHalfFull) {
  MpscRing<Record> ring(64);
  const Clock::duration waited = ParkedWait(&ring, seconds(30), [&] {
    for (uint64_t i = 0; i < 32; ++i) ASSERT_TRUE(ring.TryPush(Make(0, i)));
  });
  EXPECT_LT(waited, seconds(15));
}

TEST(MpscRingTest, PushesBelowHalfFullLeaveConsumerAsleep) {
  MpscRing<Record> ring(64);
  const Clock::duration waited = ParkedWait(&ring, milliseconds(300), [&] {
    for (uint64_t i = 0; i < 31; ++i) ASSERT_TRUE(ring.TryPush(Make(0, i)));
  });
  EXPECT_GE(waited, milliseconds(300));
  EXPECT_EQ(ring.SizeApprox(), 31u);
}

TEST(MpscRingTest, ConsumerWaitReturnsAtOnceWhenHalfFull) {
  MpscRing<Record> ring(64);
  for (uint64_t i = 0; i < 32; ++i) ASSERT_TRUE(ring.TryPush(Make(0, i)));
  const Clock::time_point start = Clock::now();
  ring.ConsumerWait(seconds(30));
  EXPECT_LT(Clock::now() - start, seconds(15));
}

TEST(MpscRingTest, WakeConsumerEndsTheCurrentOrNextWait) {
  MpscRing<Record> ring(64);
  const Clock::duration waited = ParkedWait(&ring, seconds(30), [&] { ring.WakeConsumer(); });
  EXPECT_LT(waited, seconds(15));

  MpscRing<Record> other(64);
  other.WakeConsumer();  // nobody parked: the next wait returns at once
  const Clock::time_point start = Clock::now();
  other.ConsumerWait(seconds(30));
  EXPECT_LT(Clock::now() - start, seconds(15));
}

TEST(MpscRingTest, CloseWakesParkedConsumer) {
  MpscRing<Record> ring(64);
  const Clock::duration waited = ParkedWait(&ring, seconds(30), [&] { ring.Close(); });
  EXPECT_LT(waited, seconds(15));
  const Clock::time_point start = Clock::now();
  ring.ConsumerWait(seconds(30));  // closed: no more sleeping
  EXPECT_LT(Clock::now() - start, seconds(15));
}

// A consumer that only sleeps in ConsumerWait (long timeout) still drains everything: the
// producers' half-full wake-ups keep it going, with no lost wake-up.
TEST(MpscRingTest, ParkingConsumerDrainsBlockingProducers) {
  constexpr uint32_t kProducers = 3;
  constexpr uint64_t kPerProducer = 30000;
  MpscRing<Record> ring(128);
  std::vector<std::thread> producers;
  std::atomic<uint64_t> failures{0};
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        if (!ring.Push(Make(p, i), env::OnFull::kBlock)) failures.fetch_add(1);
      }
    });
  }
  uint64_t popped = 0;
  Record r;
  const Clock::time_point deadline = Clock::now() + seconds(40);
  while (popped < kProducers * kPerProducer && Clock::now() < deadline) {
    while (ring.TryPop(&r)) ++popped;
    // Fewer than half the records can remain once the producers are done: a short timeout
    // then, a long one (only a wake-up ends it early) while they run.
    ring.ConsumerWait(popped + ring.capacity() / 2 >= kProducers * kPerProducer ? milliseconds(1)
                                                                                : seconds(5));
  }
  ring.Close();
  for (std::thread& t : producers) t.join();
  EXPECT_EQ(popped, kProducers * kPerProducer);
  EXPECT_EQ(failures.load(), 0u);
}

}  // namespace
}  // namespace cuflight::inject
