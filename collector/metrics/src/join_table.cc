#include "join_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <memory>
#include <new>

namespace cuflight::collector {

namespace {

// splitmix64's finaliser: every input bit affects every output bit, so consecutive
// correlation ids spread over all sets.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

constexpr size_t kHugePage = size_t{2} << 20;

}  // namespace

void JoinTable::FreeEntries::operator()(Entry* entries) const { std::free(entries); }

JoinTable::JoinTable(size_t capacity) {
  const size_t n = std::bit_ceil(std::max<size_t>(capacity, 64));
  const size_t bytes = (n * sizeof(Entry) + kHugePage - 1) / kHugePage * kHugePage;
  void* memory = std::aligned_alloc(kHugePage, bytes);
  if (memory == nullptr) throw std::bad_alloc();
  madvise(memory, bytes, MADV_HUGEPAGE);  // a hint; without huge pages the table still works
  entries_.reset(static_cast<Entry*>(memory));
  std::uninitialized_value_construct_n(entries_.get(), n);
  mask_ = n - 1;
}

size_t JoinTable::SetIndex(uint64_t process_id, const schema::JoinKey& key) const {
  // The graph node and the device are mixed in too, so that the nodes of one graph launch (and
  // the devices of one multi-device launch), which share a correlation id, spread over the sets
  // instead of competing for the ways of one.
  // (A collision here only shares a set; Holds() compares the whole key.)
  const uint64_t device = static_cast<uint32_t>(key.device);
  const uint64_t h = Mix(key.correlation_id ^ Mix(process_id + 0x9E3779B97F4A7C15ull) ^
                         Mix(key.graph_node_id + (device << 32)));
  return static_cast<size_t>(h) & (mask_ / kWays);  // capacity / kWays sets, a power of two
}

JoinTable::Entry* JoinTable::SetOf(uint64_t process_id, const schema::JoinKey& key) {
  return &entries_[SetIndex(process_id, key) * kWays];
}

void JoinTable::Prefetch(uint64_t process_id, const schema::JoinKey& key) const {
  const char* set = reinterpret_cast<const char*>(&entries_[SetIndex(process_id, key) * kWays]);
  // A set is kWays * 40 = 320 bytes: five or six cache lines.
  for (size_t offset = 0; offset < kWays * sizeof(Entry); offset += 64) {
    __builtin_prefetch(set + offset, /*rw=*/1, /*locality=*/3);
  }
  __builtin_prefetch(set + kWays * sizeof(Entry) - 1, 1, 3);
}

uint32_t JoinTable::NextStamp() {
  if (++clock_ == 0) clock_ = 1;
  return clock_;
}

bool JoinTable::Insert(uint64_t process_id, const schema::JoinKey& key, uint32_t value) {
  Entry* set = SetOf(process_id, key);
  Entry* target = nullptr;
  Entry* oldest = nullptr;
  uint32_t oldest_age = 0;
  for (size_t w = 0; w < kWays; ++w) {
    Entry& e = set[w];
    if (e.stamp == 0) {
      if (target == nullptr) target = &e;
      continue;
    }
    if (e.Holds(process_id, key)) {
      e.value = value;
      e.stamp = NextStamp();
      return false;
    }
    // Unsigned distance from the clock: correct across the stamp's wrap-around.
    const uint32_t age = clock_ - e.stamp;
    if (oldest == nullptr || age > oldest_age) {
      oldest = &e;
      oldest_age = age;
    }
  }
  bool evicted = false;
  if (target == nullptr) {
    target = oldest;
    evicted = true;
  } else {
    ++size_;
  }
  *target =
      Entry{process_id, key.correlation_id, key.graph_node_id, key.device, value, NextStamp()};
  return evicted;
}

std::optional<uint32_t> JoinTable::Take(uint64_t process_id, const schema::JoinKey& key) {
  Entry* set = SetOf(process_id, key);
  for (size_t w = 0; w < kWays; ++w) {
    Entry& e = set[w];
    if (e.stamp != 0 && e.Holds(process_id, key)) {
      const uint32_t value = e.value;
      e = Entry{};
      --size_;
      return value;
    }
  }
  return std::nullopt;
}

size_t JoinTable::ForgetProcess(uint64_t process_id) {
  size_t removed = 0;
  for (size_t i = 0; i <= mask_; ++i) {
    Entry& e = entries_[i];
    if (e.stamp != 0 && e.process_id == process_id) {
      e = Entry{};
      ++removed;
    }
  }
  size_ -= removed;
  return removed;
}

}  // namespace cuflight::collector
