// A bounded FIFO of lines, each tagged with its seq, over one byte ring and one descriptor ring
// that are both allocated once.
//
// Design:
//  1. Lines are stored in order, back to back, in a circular byte buffer; a line may wrap around
//     the end, so its bytes are one or two contiguous pieces (Pieces()). Because they are back to
//     back, so are the bytes of any run of consecutive lines (BytesOf(first, from, last)).
//  2. Descriptors (seq, offset, length) sit in a second circular array and are
//     addressed by monotonic indices: head_index() <= i < tail_index(). An index stays valid for
//     a line until that line is popped.
//  3. Push() requires Fits(); nothing grows, allocates or throws after Allocate().
//  4. A line can also be written in place: Back() is the free storage where the next line
//     starts, and PushWritten() takes the first bytes written there as that line, so the line is
//     never copied. Only a push (or Clear) moves the back: popping lines, even the last one,
//     leaves Back()'s bytes where they are, so what was written there stays the next line's.
//     A line written in place never wraps; one longer than the contiguous free storage is pushed
//     by copy instead (Push).
//  5. No division on any path (the sender runs these per line): positions wrap by one
//     comparison, since every sum of two in-range positions is below twice the capacity.
// Not thread-safe: one owner thread.
#ifndef CUFLIGHT_TRANSPORT_SRC_LINE_QUEUE_H_
#define CUFLIGHT_TRANSPORT_SRC_LINE_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace cuflight::transport::internal {

class LineQueue {
 public:
  // Largest byte capacity (descriptor offsets are 32-bit).
  static constexpr size_t kMaxByteCapacity = size_t{1} << 30;

  struct Line {
    uint64_t seq;
    uint32_t offset;  // physical offset of the first byte in the byte ring
    uint32_t len;     // bytes, including the final '\n'
  };
  static_assert(sizeof(Line) == 16, "Line descriptors are 16 bytes");

  // Bytes from some offset on: `first` then `second` (empty unless they wrap).
  struct Pieces {
    std::string_view first;
    std::string_view second;
  };

  LineQueue() = default;
  LineQueue(const LineQueue&) = delete;
  LineQueue& operator=(const LineQueue&) = delete;

  // Allocates room for `byte_capacity` bytes (1..kMaxByteCapacity) and `line_capacity` lines
  // (at least 1; more than byte_capacity is pointless and is cut to it). Returns false, holding
  // no memory, if a size is out of range or the allocation fails. Call once.
  bool Allocate(size_t byte_capacity, size_t line_capacity) noexcept;

  // Forgets every line; keeps the memory.
  void Clear() noexcept;

  bool Fits(size_t len) const noexcept {
    return len > 0 && lines() < line_capacity_ && bytes_ + len <= byte_capacity_;
  }
  // Appends a line whose bytes are `a` followed by `b`. Requires Fits(a.size() + b.size()).
  void Push(uint64_t seq, std::string_view a, std::string_view b = {}) noexcept;

  // The free storage the next line would start at, contiguous: up to the end of the byte ring or
  // to the oldest line, whichever comes first (an empty queue starts over at 0, so it offers the
  // whole ring). Empty when no descriptor slot is free. Stays valid, and so does what was
  // written into it, until the next Back, Push, PushWritten or Clear (point 4).
  std::span<char> Back() noexcept;
  // Appends the first `len` bytes of the last Back() as a line. Requires 0 < len <= its size,
  // and that it is still valid.
  void PushWritten(uint64_t seq, size_t len) noexcept;

  // Removes the oldest line. Requires !empty().
  void PopFront() noexcept;
  // Removes the `n` oldest lines (n <= lines()) at once; returns their bytes.
  size_t PopFront(size_t n) noexcept;

  bool empty() const noexcept { return head_ == tail_; }
  size_t lines() const noexcept { return static_cast<size_t>(tail_ - head_); }
  size_t bytes() const noexcept { return bytes_; }
  size_t byte_capacity() const noexcept { return byte_capacity_; }
  size_t line_capacity() const noexcept { return line_capacity_; }

  uint64_t head_index() const noexcept { return head_; }
  uint64_t tail_index() const noexcept { return tail_; }
  // The descriptor at monotonic index i, head_index() <= i < tail_index() (or i == tail_index()
  // while a slot is free: the next line's).
  Line& at(uint64_t i) noexcept { return descs_[Slot(i)]; }
  const Line& at(uint64_t i) const noexcept { return descs_[Slot(i)]; }
  const Line& front() const noexcept { return descs_[head_slot_]; }

  // The bytes of `line` from byte `from` (< line.len) to its end.
  Pieces BytesOf(const Line& line, size_t from) const noexcept;
  // The bytes of the lines at indices first..last (inclusive, first <= last, both held), from
  // byte `from` (< the first line's len) of the first: back to back, so at most two pieces.
  Pieces BytesOf(uint64_t first, size_t from, uint64_t last) const noexcept;
  // How many bytes the lines at indices first..last hold (inclusive, first <= last, both held),
  // from their offsets alone.
  size_t RunBytes(uint64_t first, uint64_t last) const noexcept;

 private:
  size_t Slot(uint64_t i) const noexcept {
    size_t k = head_slot_ + static_cast<size_t>(i - head_);
    if (k >= line_capacity_) k -= line_capacity_;
    return k;
  }
  // `a` + `b` wrapped into the byte ring, both below its capacity.
  size_t Wrap(size_t a, size_t b) const noexcept {
    const size_t s = a + b;
    return s >= byte_capacity_ ? s - byte_capacity_ : s;
  }
  // Where the next line's first byte goes.
  size_t BackOffset() const noexcept { return Wrap(head_offset_, bytes_); }
  Pieces Contiguous(size_t start, size_t len) const noexcept;
  void AppendDescriptor(uint64_t seq, size_t start, size_t len) noexcept;

  std::unique_ptr<char[]> data_;
  std::unique_ptr<Line[]> descs_;
  size_t byte_capacity_ = 0;
  size_t line_capacity_ = 0;
  uint64_t head_ = 0;       // monotonic index of the oldest line
  uint64_t tail_ = 0;       // monotonic index one past the newest line
  size_t head_slot_ = 0;    // descriptor slot of the oldest line
  size_t head_offset_ = 0;  // physical offset of the oldest line's first byte
  size_t bytes_ = 0;
};

}  // namespace cuflight::transport::internal

#endif  // CUFLIGHT_TRANSPORT_SRC_LINE_QUEUE_H_
