// Helpers of the readers that go through logs once (`cuflight report`, `cuflight export`): the
// seqs of a process already read, as ranges, and a hash for the long kernel names they key on.
#ifndef CUFLIGHT_REPORT_READ_ONCE_H_
#define CUFLIGHT_REPORT_READ_ONCE_H_

#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <string_view>

namespace cuflight::report {

// Adds `seq` to `seen`, disjoint ranges [first, last] keyed by first (a producer's stream is mostly
// contiguous, so this stays small); false when it was there already (the same event read twice,
// e.g. in a spill file and the collector's log).
inline bool MarkSeen(std::map<uint64_t, uint64_t>* seen, uint64_t seq) {
  // The next seq of the stream, as nearly every event is: it extends the last range (the same
  // as the general case below, without its search).
  if (!seen->empty()) {
    uint64_t& last = seen->rbegin()->second;
    if (last + 1 == seq && seq != 0) {
      last = seq;
      return true;
    }
  }
  auto next = seen->upper_bound(seq);  // first range starting after seq
  if (next != seen->begin()) {
    auto prev = std::prev(next);
    if (seq <= prev->second) return false;
    if (prev->second + 1 == seq) {
      prev->second = seq;
      if (next != seen->end() && next->first == seq + 1) {  // now touches the next range
        prev->second = next->second;
        seen->erase(next);
      }
      return true;
    }
  }
  if (next != seen->end() && next->first == seq + 1) {
    const uint64_t last = next->second;
    seen->erase(next);
    seen->emplace(seq, last);
    return true;
  }
  seen->emplace(seq, seq);
  return true;
}

// Kernel names are long (templated names of hundreds of bytes) and a log repeats a few of them
// millions of times: the hash reads eight 8-byte words spread over the name (names of one
// template differ somewhere inside), short names byte by byte. Equality must compare the whole.
inline uint64_t SampledHash(std::string_view s) {
  uint64_t h = s.size() * 0x9E3779B97F4A7C15ull;
  if (s.size() < 8) {
    for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0xBF58476D1CE4E5B9ull;
    return h;
  }
  const size_t last = s.size() - 8;
  for (size_t k = 0; k < 8; ++k) {
    uint64_t w;
    std::memcpy(&w, s.data() + last * k / 7, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return h;
}

}  // namespace cuflight::report

#endif  // CUFLIGHT_REPORT_READ_ONCE_H_
