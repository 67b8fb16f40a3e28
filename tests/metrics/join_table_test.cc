// JoinTable (collector/metrics/src, internal): eviction of the oldest entry of a full set.
#include "join_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace cuflight::collector {
namespace {

// The first `n` correlation ids of process `pid` that map to set `set`.
std::vector<uint64_t> IdsInSet(const JoinTable& table, uint64_t pid, size_t set, size_t n) {
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; ids.size() < n; ++id) {
    if (table.SetIndex(pid, id) == set) ids.push_back(id);
  }
  return ids;
}

TEST(JoinTableTest, CapacityIsRoundedUpToAPowerOfTwo) {
  EXPECT_EQ(JoinTable(0).capacity(), 64u);
  EXPECT_EQ(JoinTable(100).capacity(), 128u);
  EXPECT_EQ(JoinTable(1 << 18).capacity(), size_t{1} << 18);
}

TEST(JoinTableTest, TakeReturnsTheValueOnce) {
  JoinTable table(64);
  EXPECT_FALSE(table.Insert(1, 100, 7));
  EXPECT_FALSE(table.Insert(2, 100, 8));  // same correlation id, another process
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.Take(1, 100), 7u);
  EXPECT_EQ(table.Take(1, 100), std::nullopt);
  EXPECT_EQ(table.Take(2, 100), 8u);
  EXPECT_EQ(table.size(), 0u);
}

TEST(JoinTableTest, FullSetEvictsItsOldestEntry) {
  JoinTable table(64);  // 8 sets of 8
  const std::vector<uint64_t> ids = IdsInSet(table, 3, 5, 10);
  for (size_t i = 0; i < JoinTable::kWays; ++i) {
    EXPECT_FALSE(table.Insert(3, ids[i], static_cast<uint32_t>(i)));
  }
  // The ninth evicts the first (the oldest).
  EXPECT_TRUE(table.Insert(3, ids[8], 8));
  EXPECT_EQ(table.size(), JoinTable::kWays);
  EXPECT_EQ(table.Take(3, ids[0]), std::nullopt);
  // Re-inserting ids[1] refreshes it, so the next eviction takes ids[2].
  EXPECT_FALSE(table.Insert(3, ids[1], 11));
  EXPECT_TRUE(table.Insert(3, ids[9], 9));
  EXPECT_EQ(table.Take(3, ids[2]), std::nullopt);
  EXPECT_EQ(table.Take(3, ids[1]), 11u);
  // A freed way is reused without eviction.
  EXPECT_FALSE(table.Insert(3, ids[0], 0));
  for (size_t i = 3; i < 10; ++i) EXPECT_EQ(table.Take(3, ids[i]), static_cast<uint32_t>(i)) << i;
  EXPECT_EQ(table.Take(3, ids[0]), 0u);
  EXPECT_EQ(table.size(), 0u);
}

TEST(JoinTableTest, ForgetProcessRemovesOnlyThatProcess) {
  JoinTable table(1024);
  for (uint64_t id = 0; id < 100; ++id) {
    table.Insert(1, id, 1);
    table.Insert(2, id, 2);
  }
  EXPECT_EQ(table.ForgetProcess(1), 100u);
  EXPECT_EQ(table.size(), 100u);
  for (uint64_t id = 0; id < 100; ++id) {
    EXPECT_EQ(table.Take(1, id), std::nullopt);
    EXPECT_EQ(table.Take(2, id), 2u);
  }
}

TEST(JoinTableTest, ConsecutiveIdsSpreadOverAllSets) {
  JoinTable table(1 << 12);  // 512 sets
  std::vector<int> per_set(table.capacity() / JoinTable::kWays);
  for (uint64_t id = 0; id < 1024; ++id) ++per_set[table.SetIndex(42, id)];
  int used = 0;
  for (int n : per_set) used += n > 0;
  // 1024 keys into 512 sets uniformly leave about 512 * e^-2 = 69 sets empty.
  EXPECT_GT(used, 400);
}

}  // namespace
}  // namespace cuflight::collector
