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
  head_offset_ = 0;
  bytes_ = 0;
}

void LineQueue::Push(uint64_t seq, std::string_view a, std::string_view b) noexcept {
  const size_t len = a.size() + b.size();
  const size_t start = (head_offset_ + bytes_) % byte_capacity_;
  size_t pos = start;
  for (std::string_view part : {a, b}) {
    size_t done = 0;
    while (done < part.size()) {
      const size_t chunk = std::min(part.size() - done, byte_capacity_ - pos);
      std::memcpy(data_.get() + pos, part.data() + done, chunk);
      done += chunk;
      pos = (pos + chunk) % byte_capacity_;
    }
  }
  Line& line = at(tail_);
  line.seq = seq;
  line.offset = static_cast<uint32_t>(start);
  line.len = static_cast<uint32_t>(len) & 0x7fffffffu;
  line.written = 0;
  ++tail_;
  bytes_ += len;
}

void LineQueue::PopFront() noexcept {
  const Line& line = at(head_);
  head_offset_ = (head_offset_ + line.len) % byte_capacity_;
  bytes_ -= line.len;
  ++head_;
  if (head_ == tail_) head_offset_ = 0;  // keeps an empty queue's next line unwrapped
}

LineQueue::Pieces LineQueue::BytesOf(const Line& line, size_t from) const noexcept {
  const size_t start = (line.offset + from) % byte_capacity_;
  const size_t len = line.len - from;
  const size_t first = std::min(len, byte_capacity_ - start);
  Pieces p;
  p.first = std::string_view(data_.get() + start, first);
  if (first < len) p.second = std::string_view(data_.get(), len - first);
  return p;
}

}  // namespace cuflight::transport::internal
