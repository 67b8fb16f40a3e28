#include "cuflight/blackbox/region_source.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cuflight::blackbox {
namespace {

constexpr uint64_t kPageBytes = 4096;

// pread(2) of `n` bytes at `offset` into `out`; what cannot be read is zeroed. Returns the calls
// made and adds the bytes read to *bytes.
uint64_t ReadFully(int fd, uint64_t offset, uint8_t* out, size_t n, uint64_t* bytes) {
  uint64_t calls = 0;
  size_t done = 0;
  // Bounded: each call that returns data advances; an interrupted call is retried a few times.
  for (int interrupted = 0; done < n && interrupted < 8;) {
    ++calls;
    const ssize_t got = pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) {
      ++interrupted;
      continue;
    }
    if (got <= 0) break;
    done += static_cast<size_t>(got);
    *bytes += static_cast<uint64_t>(got);
  }
  if (done < n) std::memset(out + done, 0, n - done);
  return calls;
}

}  // namespace

void SpanSource::Read(uint64_t offset, void* out, size_t n) {
  std::memcpy(out, bytes_.data() + offset, n);
}

FdSource::FdSource(int fd, uint64_t size)
    : fd_(fd), size_(size), window_(new uint8_t[kWindowBytes]) {}

FdSource::~FdSource() = default;

void FdSource::Fill(uint64_t offset) {
  window_offset_ = offset - offset % kPageBytes;
  window_bytes_ = std::min<uint64_t>(kWindowBytes, size_ - window_offset_);
  reads_ += ReadFully(fd_, window_offset_, window_.get(), window_bytes_, &bytes_read_);
}

void FdSource::Read(uint64_t offset, void* out, size_t n) {
  auto* bytes = static_cast<uint8_t*>(out);
  if (n > kWindowBytes - kPageBytes) {  // larger than what a window surely holds: directly
    reads_ += ReadFully(fd_, offset, bytes, n, &bytes_read_);
    return;
  }
  if (offset < window_offset_ || offset + n > window_offset_ + window_bytes_) Fill(offset);
  std::memcpy(bytes, window_.get() + (offset - window_offset_), n);
}

uint64_t FdSource::NextData(uint64_t offset) {
  if (offset >= size_) return size_;
  if (!seek_holes_ || (offset >= data_begin_ && offset < data_end_)) return offset;
  ++seeks_;
  const off_t data = lseek(fd_, static_cast<off_t>(offset), SEEK_DATA);
  if (data < 0) {
    if (errno == ENXIO) return size_;  // nothing written from `offset` to the end
    seek_holes_ = false;               // a file system that cannot tell: no holes known
    return offset;
  }
  const auto begin = std::min<uint64_t>(static_cast<uint64_t>(data), size_);
  ++seeks_;
  const off_t hole = lseek(fd_, static_cast<off_t>(begin), SEEK_HOLE);
  data_begin_ = begin;
  data_end_ = hole < 0 ? size_ : std::min<uint64_t>(static_cast<uint64_t>(hole), size_);
  if (data_end_ <= data_begin_) data_end_ = data_begin_ + 1;  // a file that changed under us
  return begin;
}

}  // namespace cuflight::blackbox
