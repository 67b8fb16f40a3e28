// A bounded set of values for one label: maps the raw strings producers send to dense series
// indices, each with a label value safe for the exposition format.
//
// Design:
//  1. Series [0, reserved.size()) are the reserved values given at construction ("other" first).
//     Series are only ever added, never removed or renumbered: a raw string, once given an
//     index, keeps it for the table's life, so the counters behind it stay monotonic.
//  2. Index() on a string seen before is lock-free and allocation-free: one hash of the (cut)
//     string and a linear probe of an open-addressing table whose slots, once published by a
//     release store, are immutable. The first sight of a new string takes the mutex; once the
//     table is full, new strings go to index kOther without the mutex.
//  3. Raw strings are cut to max_label_bytes at a UTF-8 boundary before anything else, so two
//     strings with the same first bytes share a series. The label value replaces invalid UTF-8
//     bytes with '?' and appends "..." when cut. Two raw strings whose label values are equal
//     share one series (no duplicate series in the exposition); a string whose label value is
//     a reserved value goes to kOther, an empty one to `empty_index`.
#ifndef CUFLIGHT_METRICS_LABEL_TABLE_H_
#define CUFLIGHT_METRICS_LABEL_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cuflight::collector {

class LabelTable {
 public:
  static constexpr uint32_t kOther = 0;

  // `reserved`: at least one value; reserved[0] is the overflow value ("other").
  // `max_values`: series besides the reserved ones. `empty_index`: the series of "".
  LabelTable(std::vector<std::string> reserved, size_t max_values, size_t max_label_bytes,
             uint32_t empty_index = kOther);
  LabelTable(const LabelTable&) = delete;
  LabelTable& operator=(const LabelTable&) = delete;

  // The series of `raw`, in [0, capacity()). Any thread.
  uint32_t Index(std::string_view raw);

  // Series published so far (reserved ones included); label(i) is valid for i < size().
  // Any thread (acquire: the labels of the returned count are visible).
  size_t size() const { return size_.load(std::memory_order_acquire); }
  // The label value of series `index` < size(), unescaped. Immutable once published.
  const std::string& label(size_t index) const { return labels_[index]; }
  // Upper bound of every index: reserved values + max_values.
  size_t capacity() const { return capacity_; }
  size_t reserved_count() const { return reserved_count_; }

  // `raw` cut to at most `max_bytes` without splitting a UTF-8 sequence.
  static std::string_view CutUtf8(std::string_view raw, size_t max_bytes);
  // `raw` with each byte that is not part of a valid UTF-8 sequence replaced by '?'.
  static std::string SanitizeUtf8(std::string_view raw);

 private:
  struct Slot {
    // Series index + 1 once published (release); 0 while empty.
    std::atomic<uint32_t> series{0};
    uint64_t hash = 0;
    bool cut = false;  // `key` is a cut prefix of a longer raw string
    std::string key;
  };

  uint32_t Insert(std::string_view key, bool cut, uint64_t hash);
  // Series of the published slot holding (`key`, `cut`), or -1.
  int64_t Find(std::string_view key, bool cut, uint64_t hash) const;

  const size_t capacity_;
  const size_t reserved_count_;
  const size_t max_label_bytes_;
  const uint32_t empty_index_;
  const size_t max_keys_;  // raw strings remembered (aliases included)
  std::unique_ptr<std::string[]> labels_;
  std::atomic<size_t> size_{0};
  std::unique_ptr<Slot[]> slots_;
  size_t slot_mask_ = 0;
  std::atomic<bool> full_{false};  // no series or key can be added any more

  std::mutex insert_mu_;  // guards the writes below and every slot/label write
  size_t keys_ = 0;
  std::unordered_map<std::string, uint32_t> series_by_label_;
};

}  // namespace cuflight::collector

#endif  // CUFLIGHT_METRICS_LABEL_TABLE_H_
