#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "cuflight/occupancy/occupancy_cache.h"

namespace cuflight::occupancy {
namespace {

CacheKey Key(uint64_t function, uint32_t block) {
  CacheKey k;
  k.function = function;
  k.block_x = block;
  k.block_y = 1;
  k.block_z = 1;
  return k;
}

schema::OccupancyFields Fields(int blocks) {
  schema::OccupancyFields f;
  f.max_active_blocks = blocks;
  f.occupancy = blocks / 64.0;
  return f;
}

TEST(OccupancyCache, MissThenHit) {
  OccupancyCache cache(128);
  schema::OccupancyFields out;
  EXPECT_FALSE(cache.Lookup(Key(1, 256), &out));
  EXPECT_TRUE(cache.Insert(Key(1, 256), Fields(6)));
  ASSERT_TRUE(cache.Lookup(Key(1, 256), &out));
  EXPECT_EQ(out.max_active_blocks, 6);
  // Every key field matters.
  CacheKey other = Key(1, 256);
  other.dyn_smem = 1;
  EXPECT_FALSE(cache.Lookup(other, &out));
  other = Key(1, 256);
  other.carveout = 50;
  EXPECT_FALSE(cache.Lookup(other, &out));
  other = Key(1, 256);
  other.cluster_x = 2;
  EXPECT_FALSE(cache.Lookup(other, &out));
  other = Key(1, 256);
  other.device = 1;
  EXPECT_FALSE(cache.Lookup(other, &out));
}

TEST(OccupancyCache, FullCacheRefusesWithoutCorruptingEntries) {
  OccupancyCache cache(64);
  int inserted = 0;
  for (uint32_t i = 0; i < 1000; ++i) inserted += cache.Insert(Key(i, 32), Fields(static_cast<int>(i % 33)));
  EXPECT_LE(inserted, static_cast<int>(cache.capacity()));
  EXPECT_LT(inserted, 1000);
  int found = 0;
  for (uint32_t i = 0; i < 1000; ++i) {
    schema::OccupancyFields out;
    if (cache.Lookup(Key(i, 32), &out)) {
      ++found;
      EXPECT_EQ(out.max_active_blocks, static_cast<int>(i % 33));
    }
  }
  EXPECT_EQ(found, inserted);
}

TEST(OccupancyCache, ConcurrentReadersAndWritersSeeOnlyCompleteEntries) {
  OccupancyCache cache(4096);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) {}
      for (uint32_t i = 0; i < 2000; ++i) {
        const uint32_t k = (i * 7 + static_cast<uint32_t>(t)) % 1500;
        schema::OccupancyFields out;
        if (cache.Lookup(Key(k, 64), &out)) {
          if (out.max_active_blocks != static_cast<int>(k % 29) ||
              out.occupancy != (k % 29) / 64.0) {
            bad.fetch_add(1);
          }
        } else {
          cache.Insert(Key(k, 64), Fields(static_cast<int>(k % 29)));
        }
      }
    });
  }
  go.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  schema::OccupancyFields out;
  EXPECT_TRUE(cache.Lookup(Key(7, 64), &out));
}

}  // namespace
}  // namespace cuflight::occupancy
