// Launches waiting for their kernel_time while a reader (the report, the export) reads, by join
// key (join_key.h): an open-addressing hash table (linear probing, power-of-two capacity, at most
// half full, removal by backward shift, consecutive correlation ids in neighbouring slots), so a
// launch costs no allocation and few cache misses. Each slot keeps its key's hash, so a removal's
// shift hashes nothing. A key may be held more than once (the same launch read under two seqs);
// Take hands back every entry with the key.
#ifndef CUFLIGHT_REPORT_JOIN_TABLE_H_
#define CUFLIGHT_REPORT_JOIN_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuflight/report/join_key.h"

namespace cuflight::report {

template <class V>
class JoinTable {
 public:
  size_t size() const { return size_; }

  void Insert(const JoinKey& key, const V& value) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    const size_t place = Place(key);
    size_t i = place & mask_;
    while (slots_[i].used) i = (i + 1) & mask_;
    slots_[i] = Slot{true, place, key, value};
    ++size_;
  }

  // Calls f(value) for every entry with `key` and removes them; returns how many there were.
  template <class F>
  size_t Take(const JoinKey& key, F f) {
    if (size_ == 0) return 0;
    size_t taken = 0;
    size_t i = Home(key);
    while (slots_[i].used) {
      if (slots_[i].key == key) {
        f(slots_[i].value);
        Remove(i);  // shifts a later entry into i: look at i again
        ++taken;
        continue;
      }
      i = (i + 1) & mask_;
    }
    return taken;
  }

  // Removes the first entry with `key` for which pred(value) holds, calling f(value) first.
  template <class P, class F>
  bool TakeIf(const JoinKey& key, P pred, F f) {
    if (size_ == 0) return false;
    for (size_t i = Home(key); slots_[i].used; i = (i + 1) & mask_) {
      if (slots_[i].key == key && pred(slots_[i].value)) {
        f(slots_[i].value);
        Remove(i);
        return true;
      }
    }
    return false;
  }

  template <class F>
  void ForEach(F f) const {
    for (const Slot& s : slots_) {
      if (s.used) f(s.value);
    }
  }

  void Clear() {
    slots_.clear();
    size_ = 0;
    mask_ = 0;
  }

 private:
  struct Slot {
    bool used = false;
    size_t place = 0;  // Place(key): its home is place & mask_, found without hashing again
    JoinKey key{};
    V value{};
  };

  // Launches arrive in correlation-id order, and their times in the same order a little later:
  // the ids of kRun consecutive launches share one run of slots (their low bits pick the slot
  // in it), and a hash of the rest places the run. So a stream of launches touches one cache line
  // per few launches, not one per launch, while ids with any stride still spread over the table.
  static constexpr unsigned kRunBits = 3;
  size_t Place(const JoinKey& key) const {
    JoinKey run = key;
    run.launch.correlation_id >>= kRunBits;
    const size_t low = key.launch.correlation_id & ((size_t{1} << kRunBits) - 1);
    return (JoinKeyHash()(run) << kRunBits) | low;
  }
  size_t Home(const JoinKey& key) const { return Place(key) & mask_; }

  // Backward-shift deletion: later entries of the probe run move up so no lookup stops early.
  void Remove(size_t hole) {
    size_t i = hole;
    for (;;) {
      i = (i + 1) & mask_;
      if (!slots_[i].used) break;
      const size_t home = slots_[i].place & mask_;
      // Move slot i into the hole when its home is not within (hole, i] (cyclically).
      const bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
      if (stays) continue;
      slots_[hole] = std::move(slots_[i]);
      hole = i;
    }
    slots_[hole].used = false;
    --size_;
  }

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    const size_t capacity = old.empty() ? 1024 : old.size() * 2;
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    size_ = 0;
    for (Slot& s : old) {
      if (s.used) Insert(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t mask_ = 0;
};

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_JOIN_TABLE_H_
