#include "line_queue.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace cuflight::transport::internal {

bool LineQueue::Allocate(size_t byte_capacity, size_t line_capacity) noexcept {
  data_.reset();
  descs_.reset();
  byte_capacity_ = 0;
  line_capacity_ = 0;
  Clear();
  if (byte_capacity == 0 || byte_capacity > kMaxByteCapacity || line_capacity == 0) return false;
  line_capacity = std::min(line_capacity, byte_capacity);  // every line holds at least one byte
  data_.reset(new (std::nothrow) char[byte_capacity]);
  descs_.reset(new (std::nothrow) Line[line_capacity]);
  if (!data_ || !descs_) {
    data_.reset();
    descs_.reset();
    return false;
  }
  byte_capacity_ = byte_capacity;
  line_capacity_ = line_capacity;
  return true;
}

void LineQueue::Clear() noexcept {
  head_ = 0;
  tail_ = 0;
  head_slot_ = 0;
  head_offset_ = 0;
  bytes_ = 0;
}

void LineQueue::AppendDescriptor(uint64_t seq, size_t start, size_t len) noexcept {
  Line& line = at(tail_);
  line.seq = seq;
  line.offset = static_cast<uint32_t>(start);
  line.len = static_cast<uint32_t>(len);
  ++tail_;
  bytes_ += len;
}

void LineQueue::Push(uint64_t seq, std::string_view a, std::string_view b) noexcept {
  if (empty()) head_offset_ = 0;  // an empty queue's next line starts unwrapped
  const size_t start = BackOffset();
  size_t pos = start;
  for (std::string_view part : {a, b}) {
    size_t done = 0;
    while (done < part.size()) {
      const size_t chunk = std::min(part.size() - done, byte_capacity_ - pos);
      std::memcpy(data_.get() + pos, part.data() + done, chunk);
      done += chunk;
      pos = Wrap(pos, chunk);
    }
  }
  AppendDescriptor(seq, start, a.size() + b.size());
}

std::span<char> LineQueue::Back() noexcept {
  if (lines() >= line_capacity_ || bytes_ >= byte_capacity_) return {};
  if (empty()) head_offset_ = 0;  // the whole ring, contiguous
  const size_t start = BackOffset();
  // Free storage runs from the back to the oldest line's first byte, or to the end of the ring
  // when the lines held do not wrap (the rest of it is at the ring's start, not contiguous).
  const size_t end = start < head_offset_ ? head_offset_ : byte_capacity_;
  return {data_.get() + start, end - start};
}

void LineQueue::PushWritten(uint64_t seq, size_t len) noexcept {
  // No reset of an empty queue here: Back() chose the offset, and pops since then kept it.
  AppendDescriptor(seq, BackOffset(), len);
}

void LineQueue::PopFront() noexcept {
  const Line& line = front();
  head_offset_ = Wrap(head_offset_, line.len);
  bytes_ -= line.len;
  ++head_;
  if (++head_slot_ == line_capacity_) head_slot_ = 0;
  // An empty queue keeps head_offset_ at its back (point 4): Back() starts it over at 0.
}

size_t LineQueue::PopFront(size_t n) noexcept {
  if (n == 0) return 0;
  const size_t bytes = RunBytes(head_, head_ + n - 1);
  head_offset_ = Wrap(head_offset_, bytes);
  bytes_ -= bytes;
  head_ += n;
  head_slot_ += n;  // n <= line_capacity_
  if (head_slot_ >= line_capacity_) head_slot_ -= line_capacity_;
  return bytes;
}

LineQueue::Pieces LineQueue::Contiguous(size_t start, size_t len) const noexcept {
  const size_t first = std::min(len, byte_capacity_ - start);
  Pieces p;
  p.first = std::string_view(data_.get() + start, first);
  if (first < len) p.second = std::string_view(data_.get(), len - first);
  return p;
}

LineQueue::Pieces LineQueue::BytesOf(const Line& line, size_t from) const noexcept {
  return Contiguous(Wrap(line.offset, from), line.len - from);
}

size_t LineQueue::RunBytes(uint64_t first, uint64_t last) const noexcept {
  const Line& a = at(first);
  const Line& b = at(last);
  // The ring distance from a's first byte to one past b's last: the lines' total, which is the
  // whole ring when they fill it (the distance is 0 then, and no line is empty).
  const size_t end = Wrap(b.offset, b.len);
  const size_t len = end >= a.offset ? end - a.offset : end + byte_capacity_ - a.offset;
  return len == 0 ? byte_capacity_ : len;
}

LineQueue::Pieces LineQueue::BytesOf(uint64_t first, size_t from, uint64_t last) const noexcept {
  return Contiguous(Wrap(at(first).offset, from), RunBytes(first, last) - from);
}

}  // namespace cuflight::transport::internal
