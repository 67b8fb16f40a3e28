// Newline framing of one connection's byte stream, with a bound on memory.
//
// Complete lines inside a chunk are handed out as views into the chunk (no copy); only the
// unfinished tail of a chunk is kept, and never more than max_line_bytes of it. A line longer than
// max_line_bytes (not counting its '\n') is reported once, as soon as its length is known to be too
// long, and the rest of it is skipped up to its '\n' without being stored. So a peer that trickles
// bytes or never sends a newline holds at most max_line_bytes here.
#ifndef CUFLIGHT_COLLECTOR_DAEMON_LINE_FRAMER_H_
#define CUFLIGHT_COLLECTOR_DAEMON_LINE_FRAMER_H_

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace cuflight::collector {

class LineFramer {
 public:
  // max_line_bytes >= 1.
  explicit LineFramer(size_t max_line_bytes) : max_(max_line_bytes) {}

  // Splits `chunk` (the next bytes of the stream) into lines. Calls on_line(line) for each
  // complete line of at most max_line_bytes before its '\n'; `line` ends with the '\n' and is
  // valid only during the call. Calls on_too_long() once per over-long line. Lines are reported in
  // stream order.
  template <class OnLine, class OnTooLong>
  void Feed(std::string_view chunk, OnLine&& on_line, OnTooLong&& on_too_long);

  // Changes the bound for the lines after the current one (>= 1); may be called from on_line.
  // The collector lets a connection's first line (process_start) be longer than the rest.
  void set_max_line_bytes(size_t max_line_bytes) { max_ = max_line_bytes; }

  // Bytes of an unfinished line held (0..max_line_bytes).
  size_t buffered() const { return partial_.size(); }
  // Inside an over-long line whose end has not been seen.
  bool discarding() const { return discarding_; }
  // Whether an unfinished line (held or being skipped) is pending: at end of stream it is lost.
  bool mid_line() const { return discarding_ || !partial_.empty(); }

 private:
  // Keeps the held buffer small for connections that once carried a long line.
  static constexpr size_t kKeepCapacity = 16 * 1024;

  void ClearPartial() {
    partial_.clear();
    if (partial_.capacity() > kKeepCapacity) std::string().swap(partial_);
  }

  size_t max_;
  std::string partial_;
  bool discarding_ = false;
};

template <class OnLine, class OnTooLong>
void LineFramer::Feed(std::string_view chunk, OnLine&& on_line, OnTooLong&& on_too_long) {
  const char* p = chunk.data();
  const char* const end = p + chunk.size();
  // Finish the line begun in an earlier chunk (or the over-long one being skipped).
  if (discarding_ || !partial_.empty()) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (discarding_) {
      if (nl == nullptr) return;
      discarding_ = false;
      p = nl + 1;
    } else {
      const size_t take = static_cast<size_t>((nl != nullptr ? nl : end) - p);
      if (partial_.size() + take > max_) {
        ClearPartial();
        on_too_long();
        if (nl == nullptr) {
          discarding_ = true;
          return;
        }
        p = nl + 1;
      } else if (nl == nullptr) {
        partial_.append(p, take);
        return;
      } else {
        partial_.append(p, take + 1);
        on_line(std::string_view(partial_));
        ClearPartial();
        p = nl + 1;
      }
    }
  }
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    if (nl == nullptr) {
      const size_t rest = static_cast<size_t>(end - p);
      if (rest > max_) {
        on_too_long();
        discarding_ = true;
      } else {
        partial_.assign(p, rest);
      }
      return;
    }
    const size_t length = static_cast<size_t>(nl - p);
    if (length > max_) {
      on_too_long();
    } else {
      on_line(std::string_view(p, length + 1));
    }
    p = nl + 1;
  }
}

}  // namespace cuflight::collector

#endif  // CUFLIGHT_COLLECTOR_DAEMON_LINE_FRAMER_H_
