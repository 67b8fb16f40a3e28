// report::JoinTable (report/include/cuflight/report/join_table.h) against a std::multimap, on the
// id patterns a log holds and on patterns chosen against its slot placement: consecutive ids,
// strides of every power of two up to past the table's size, one id shared by many graph nodes
// and devices, and two processes with the same ids.
#include "cuflight/report/join_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace cuflight::report {
namespace {

JoinKey Key(size_t process, uint64_t correlation_id, uint64_t node = 0, int32_t device = 0) {
  return JoinKey{process, schema::JoinKey{correlation_id, node, device}};
}

struct KeyLess {
  bool operator()(const JoinKey& a, const JoinKey& b) const {
    return std::tie(a.process, a.launch) < std::tie(b.process, b.launch);
  }
};

// Inserts `keys` (value: the insertion number), takes a third of them in a shuffled order,
// inserts them again, then takes every key: each Take must hand back exactly the values the
// multimap holds for the key, and size() follow.
void CheckAgainstMultimap(const std::vector<JoinKey>& keys) {
  JoinTable<uint64_t> table;
  std::multimap<JoinKey, uint64_t, KeyLess> want;
  uint64_t n = 0;
  for (const JoinKey& k : keys) {
    table.Insert(k, n);
    want.emplace(k, n);
    ++n;
  }
  ASSERT_EQ(table.size(), want.size());
  std::vector<JoinKey> order = keys;
  std::mt19937_64 rng(42);
  std::shuffle(order.begin(), order.end(), rng);
  const auto take = [&](const JoinKey& k) {
    std::vector<uint64_t> got;
    const size_t taken = table.Take(k, [&](uint64_t v) { got.push_back(v); });
    std::vector<uint64_t> expected;
    const auto [lo, hi] = want.equal_range(k);
    for (auto it = lo; it != hi; ++it) expected.push_back(it->second);
    want.erase(lo, hi);
    std::sort(got.begin(), got.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(got, expected);
    EXPECT_EQ(taken, expected.size());
    EXPECT_EQ(table.size(), want.size());
  };
  for (size_t i = 0; i < order.size() / 3; ++i) take(order[i]);
  for (size_t i = 0; i < order.size() / 3; ++i) {
    table.Insert(order[i], n);
    want.emplace(order[i], n);
    ++n;
  }
  for (const JoinKey& k : order) take(k);
  EXPECT_EQ(table.size(), 0u);
}

TEST(ReportJoinTableTest, ConsecutiveIdsAsALogHoldsThem) {
  std::vector<JoinKey> keys;
  for (uint64_t id = 1; id <= 5000; ++id) keys.push_back(Key(0, id));
  CheckAgainstMultimap(keys);
}

TEST(ReportJoinTableTest, IdsAtEveryPowerOfTwoStride) {
  for (unsigned shift = 1; shift <= 24; ++shift) {
    SCOPED_TRACE(shift);
    std::vector<JoinKey> keys;
    for (uint64_t i = 0; i < 3000; ++i) keys.push_back(Key(0, 7 + (i << shift)));
    CheckAgainstMultimap(keys);
  }
}

TEST(ReportJoinTableTest, GraphNodesAndDevicesOfOneIdAndTwoProcesses) {
  std::vector<JoinKey> keys;
  for (uint64_t id = 1; id <= 40; ++id) {
    for (uint64_t node = 1; node <= 30; ++node) keys.push_back(Key(0, id, node * 0x10000 + 3));
    for (int32_t device = 0; device < 8; ++device) keys.push_back(Key(1, id, 0, device));
    keys.push_back(Key(0, id));
    keys.push_back(Key(1, id));
  }
  CheckAgainstMultimap(keys);
}

TEST(ReportJoinTableTest, AKeyHeldTwiceIsTakenTwiceInOneTake) {
  std::vector<JoinKey> keys;
  for (uint64_t id = 1; id <= 2000; ++id) {
    keys.push_back(Key(0, id));
    if (id % 3 == 0) keys.push_back(Key(0, id));
  }
  CheckAgainstMultimap(keys);
}

}  // namespace
}  // namespace cuflight::report
