#include "label_table.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <utility>

namespace cuflight::collector {

namespace {

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence starting at s[i], or 0 if none starts there (overlong
// forms, surrogates and code points above U+10FFFF are invalid, as in Go's utf8.ValidString).
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  const auto second = static_cast<unsigned char>(s[i + 1]);
  if (second < lo || second > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (!IsContinuation(static_cast<unsigned char>(s[i + k]))) return 0;
  }
  return n;
}

uint64_t HashOf(std::string_view key) { return std::hash<std::string_view>{}(key); }

constexpr uint64_t kCutHashMark = 0x9E3779B97F4A7C15ull;

}  // namespace

LabelTable::LabelTable(std::vector<std::string> reserved, size_t max_values, size_t max_label_bytes,
                       uint32_t empty_index)
    : capacity_(reserved.size() + max_values),
      reserved_count_(reserved.size()),
      max_label_bytes_(max_label_bytes),
      empty_index_(empty_index),
      // Room for one alias per series on top of the series themselves; aliases need invalid
      // UTF-8, a cut name or a reserved value, so this is never the binding limit in practice.
      max_keys_(2 * capacity_),
      labels_(std::make_unique<std::string[]>(capacity_)) {
  // Load factor at most 1/4 keeps probe chains short for the lock-free lookups.
  const size_t slots = std::bit_ceil(std::max<size_t>(16, 4 * max_keys_));
  slots_ = std::make_unique<Slot[]>(slots);
  slot_mask_ = slots - 1;
  for (size_t i = 0; i < reserved.size(); ++i) {
    series_by_label_.emplace(reserved[i], static_cast<uint32_t>(i));
    labels_[i] = std::move(reserved[i]);
  }
  size_.store(reserved_count_, std::memory_order_release);
  if (max_values == 0) full_.store(true, std::memory_order_relaxed);
}

std::string_view LabelTable::CutUtf8(std::string_view raw, size_t max_bytes) {
  if (raw.size() <= max_bytes) return raw;
  size_t end = max_bytes;
  // Back up over continuation bytes so the cut falls before a sequence's lead byte.
  while (end > 0 && IsContinuation(static_cast<unsigned char>(raw[end]))) --end;
  return raw.substr(0, end);
}

std::string LabelTable::SanitizeUtf8(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    const size_t n = Utf8SequenceLength(raw, i);
    if (n == 0) {
      out.push_back('?');
      ++i;
    } else {
      out.append(raw.substr(i, n));
      i += n;
    }
  }
  return out;
}

int64_t LabelTable::Find(std::string_view key, bool cut, uint64_t hash) const {
  for (size_t i = hash & slot_mask_;; i = (i + 1) & slot_mask_) {
    const Slot& slot = slots_[i];
    const uint32_t series = slot.series.load(std::memory_order_acquire);
    if (series == 0) return -1;  // end of the probe chain (slots are never emptied)
    if (slot.hash == hash && slot.cut == cut && slot.key == key)
      return static_cast<int64_t>(series - 1);
  }
}

uint32_t LabelTable::Index(std::string_view raw) {
  const std::string_view key = CutUtf8(raw, max_label_bytes_);
  if (key.empty()) return empty_index_;
  // A cut string and an uncut one with the same bytes are different keys (their labels differ
  // by the "..." mark).
  const bool cut = key.size() < raw.size();
  const uint64_t hash = HashOf(key) ^ (cut ? kCutHashMark : 0);
  const int64_t found = Find(key, cut, hash);
  if (found >= 0) return static_cast<uint32_t>(found);
  if (full_.load(std::memory_order_relaxed)) return kOther;
  return Insert(key, cut, hash);
}

uint32_t LabelTable::Insert(std::string_view key, bool cut, uint64_t hash) {
  std::lock_guard<std::mutex> lock(insert_mu_);
  // Another thread may have inserted `key` since the lock-free Find.
  const int64_t found = Find(key, cut, hash);
  if (found >= 0) return static_cast<uint32_t>(found);
  if (full_.load(std::memory_order_relaxed) || keys_ >= max_keys_) return kOther;

  std::string label = SanitizeUtf8(key);
  if (cut) label += "...";
  uint32_t series;
  auto it = series_by_label_.find(label);
  if (it != series_by_label_.end()) {
    // Same label as an existing series (or a reserved value): share it, or count as "other".
    series = it->second < reserved_count_ ? kOther : it->second;
  } else {
    const size_t n = size_.load(std::memory_order_relaxed);
    if (n >= capacity_) {
      full_.store(true, std::memory_order_relaxed);
      return kOther;
    }
    series = static_cast<uint32_t>(n);
    labels_[n] = label;
    series_by_label_.emplace(std::move(label), series);
    size_.store(n + 1, std::memory_order_release);
    if (n + 1 >= capacity_) full_.store(true, std::memory_order_relaxed);
  }

  size_t i = hash & slot_mask_;
  while (slots_[i].series.load(std::memory_order_relaxed) != 0) i = (i + 1) & slot_mask_;
  slots_[i].hash = hash;
  slots_[i].cut = cut;
  slots_[i].key.assign(key);
  slots_[i].series.store(series + 1, std::memory_order_release);
  if (++keys_ >= max_keys_) full_.store(true, std::memory_order_relaxed);
  return series;
}

}  // namespace cuflight::collector
