// JoinTable (collector/metrics/src, internal): the whole join key (correlation id, graph node,
// device) per process, and eviction of the oldest entry of a full set.
#include "join_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace cuflight::collector {
namespace {

using schema::JoinKey;

// An ordinary launch's key: correlation id `id` on device 0, no graph node.
JoinKey Launch(uint64_t id) { return {id, 0, 0}; }

// The first `n` keys (correlation ids of ordinary launches on device 0) of process `pid` that map
// to set `set`.
std::vector<JoinKey> IdsInSet(const JoinTable& table, uint64_t pid, size_t set, size_t n) {
  std::vector<JoinKey> ids;
  for (uint64_t id = 0; ids.size() < n; ++id) {
    if (table.SetIndex(pid, Launch(id)) == set) ids.push_back(Launch(id));
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
  EXPECT_FALSE(table.Insert(1, Launch(100), 7));
  EXPECT_FALSE(table.Insert(2, Launch(100), 8));  // same correlation id, another process
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.Take(1, Launch(100)), 7u);
  EXPECT_EQ(table.Take(1, Launch(100)), std::nullopt);
  EXPECT_EQ(table.Take(2, Launch(100)), 8u);
  EXPECT_EQ(table.size(), 0u);
}

// The kernel nodes of one cuGraphLaunch share its correlation id (CUPTI: the kernel record's
// correlationId is the launching API call's; graphNodeId tells the nodes apart), and so do the
// per-device kernels of one cuLaunchCooperativeKernelMultiDevice call: each is its own entry.
TEST(JoinTableTest, NodesAndDevicesOfOneCorrelationIdAreSeparateEntries) {
  JoinTable table(64);
  const JoinKey node1{500, 0x100000001, 0};
  const JoinKey node2{500, 0x100000002, 0};
  const JoinKey node3{500, 0x100000003, 0};
  const JoinKey device0{600, 0, 0};
  const JoinKey device1{600, 0, 1};
  EXPECT_FALSE(table.Insert(1, node1, 11));
  EXPECT_FALSE(table.Insert(1, node2, 12));
  EXPECT_FALSE(table.Insert(1, node3, 13));
  EXPECT_FALSE(table.Insert(1, device0, 20));
  EXPECT_FALSE(table.Insert(1, device1, 21));
  EXPECT_EQ(table.size(), 5u);
  // Nothing answers for the correlation id alone, nor for a node on another device.
  EXPECT_EQ(table.Take(1, Launch(500)), std::nullopt);
  EXPECT_EQ(table.Take(1, JoinKey{500, 0x100000002, 1}), std::nullopt);
  EXPECT_EQ(table.Take(1, node3), 13u);
  EXPECT_EQ(table.Take(1, node1), 11u);
  EXPECT_EQ(table.Take(1, node2), 12u);
  EXPECT_EQ(table.Take(1, device1), 21u);
  EXPECT_EQ(table.Take(1, device0), 20u);
  EXPECT_EQ(table.size(), 0u);
}

TEST(JoinTableTest, FullSetEvictsItsOldestEntry) {
  JoinTable table(64);  // 8 sets of 8
  const std::vector<JoinKey> ids = IdsInSet(table, 3, 5, 10);
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
    table.Insert(1, Launch(id), 1);
    table.Insert(2, Launch(id), 2);
  }
  EXPECT_EQ(table.ForgetProcess(1), 100u);
  EXPECT_EQ(table.size(), 100u);
  for (uint64_t id = 0; id < 100; ++id) {
    EXPECT_EQ(table.Take(1, Launch(id)), std::nullopt);
    EXPECT_EQ(table.Take(2, Launch(id)), 2u);
  }
}

TEST(JoinTableTest, ConsecutiveIdsSpreadOverAllSets) {
  JoinTable table(1 << 12);  // 512 sets
  std::vector<int> per_set(table.capacity() / JoinTable::kWays);
  for (uint64_t id = 0; id < 1024; ++id) ++per_set[table.SetIndex(42, Launch(id))];
  int used = 0;
  for (int n : per_set) used += n > 0;
  // 1024 keys into 512 sets uniformly leave about 512 * e^-2 = 69 sets empty.
  EXPECT_GT(used, 400);
}

// The 1024 nodes of one graph launch (one correlation id) spread over the sets too, rather than
// competing for the 8 ways of one set and evicting each other.
TEST(JoinTableTest, NodesOfOneGraphLaunchSpreadOverAllSets) {
  JoinTable table(1 << 12);  // 512 sets
  std::vector<int> per_set(table.capacity() / JoinTable::kWays);
  for (uint64_t node = 1; node <= 1024; ++node) {
    ++per_set[table.SetIndex(42, JoinKey{77, 0x7f0000000000 + node, 0})];
  }
  int used = 0;
  for (int n : per_set) used += n > 0;
  EXPECT_GT(used, 400);  // as above: about 443 expected
  uint64_t evicted = 0;
  for (uint64_t node = 1; node <= 1024; ++node) {
    evicted += table.Insert(42, JoinKey{77, 0x7f0000000000 + node, 0}, 1);
  }
  // Keyed by correlation id alone, all 1024 would share one set and 1016 be evicted. Spread
  // uniformly (Poisson, mean 2 per set), a set gets more than 8 with probability 2.4e-4.
  EXPECT_LE(evicted, 8u);
}

}  // namespace
}  // namespace cuflight::collector
