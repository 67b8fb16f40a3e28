// Where the collector's recovery reader (region_reader.h) gets a region's bytes from.
//
// Design:
//  1. A region is a producer's memfd: its pages exist only where the producer wrote (a tmpfs
//     file is sparse). Touching a page that was never written through a shared mapping makes
//     the kernel allocate it and charge it to the toucher's memory cgroup, where it stays as
//     long as anyone holds the memfd: a producer that claims a full ring and writes only its
//     header would make the collector pay for the whole region. So the collector never maps a
//     region: FdSource reads it with pread(2), which copies the shared zero page for a hole and
//     allocates nothing (shmem's read path, mm/shmem.c: SGP_READ "don't allocate"), through a
//     small window, and tells the reader where the holes are (lseek(2) SEEK_DATA/SEEK_HOLE,
//     which tmpfs supports since Linux 3.8) so that it skips them instead of reading zeros.
//  2. What a source costs the reader's process is its window (kWindowBytes): nothing grows with
//     the region's size.
//  3. SpanSource: a region in memory (tests, the fuzzer, a writer over caller memory).
//
// Threads: one thread per source.
#ifndef CUFLIGHT_BLACKBOX_REGION_SOURCE_H_
#define CUFLIGHT_BLACKBOX_REGION_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace cuflight::blackbox {

class RegionSource {
 public:
  virtual ~RegionSource() = default;
  // The region's size in bytes.
  virtual uint64_t size() const = 0;
  // Copies the `n` bytes at `offset` into `out` (offset + n <= size()). Bytes that cannot be
  // read (an I/O error) read as zeros, as a hole does.
  virtual void Read(uint64_t offset, void* out, size_t n) = 0;
  // The first offset at or after `offset` whose bytes the producer may have written: everything
  // in [offset, result) is a hole, never written, and reads as zeros. size() when nothing is
  // written from `offset` on. A source that cannot tell returns `offset`.
  virtual uint64_t NextData(uint64_t offset) { return offset; }
};

// A region in memory; the bytes must outlive the source.
class SpanSource final : public RegionSource {
 public:
  explicit SpanSource(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  void Read(uint64_t offset, void* out, size_t n) override;

 private:
  std::span<const uint8_t> bytes_;
};

// A region in a file (a memfd), read with pread(2) through a window of kWindowBytes; holes found
// with lseek(2) SEEK_DATA/SEEK_HOLE. Does not own `fd`; reads [0, size) of it. lseek moves the
// file offset the descriptor shares with its other holders: the producer writes through a
// mapping, never at the offset, so nothing of its depends on it.
class FdSource final : public RegionSource {
 public:
  static constexpr size_t kWindowBytes = size_t{64} << 10;

  FdSource(int fd, uint64_t size);
  ~FdSource() override;
  FdSource(const FdSource&) = delete;
  FdSource& operator=(const FdSource&) = delete;

  uint64_t size() const override { return size_; }
  void Read(uint64_t offset, void* out, size_t n) override;
  uint64_t NextData(uint64_t offset) override;

  // pread(2) calls made and bytes they returned, lseek(2) calls: what reading cost.
  uint64_t reads() const { return reads_; }
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t seeks() const { return seeks_; }

 private:
  void Fill(uint64_t offset);

  const int fd_;
  const uint64_t size_;
  std::unique_ptr<uint8_t[]> window_;
  uint64_t window_offset_ = 0;
  uint64_t window_bytes_ = 0;  // valid bytes in the window
  // The extent last found written: [data_begin_, data_end_); holes are outside it.
  uint64_t data_begin_ = 0;
  uint64_t data_end_ = 0;
  bool seek_holes_ = true;  // false once lseek SEEK_DATA failed other than ENXIO
  uint64_t reads_ = 0;
  uint64_t bytes_read_ = 0;
  uint64_t seeks_ = 0;
};

}  // namespace cuflight::blackbox

#endif  // CUFLIGHT_BLACKBOX_REGION_SOURCE_H_
