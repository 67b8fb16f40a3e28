#include "stream_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "log_dir.h"
#include "segment_names.h"

namespace cuflight::exporter {
namespace {

// Read size: large enough that a 64 MiB segment is a few hundred reads, small enough to be one
// allocation of the exporter's bounded memory.
constexpr size_t kChunk = 256 * 1024;

}  // namespace

bool ListStreams(int dir_fd, std::map<std::string, StreamFiles>* out, std::string* error) {
  out->clear();
  std::vector<logstore::DirEntry> dates;
  int err = 0;
  if (!logstore::ListDirectory(dir_fd, &dates, &err)) {
    *error = std::string("cannot list the log directory: ") + std::strerror(err);
    return false;
  }
  for (const logstore::DirEntry& date : dates) {
    if (date.kind != logstore::DirEntry::Kind::kDirectory || !schema::IsDateDirName(date.name)) {
      continue;
    }
    base::ScopedFd sub(::openat(dir_fd, date.name.c_str(),
                                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.Get() < 0) continue;
    std::vector<logstore::DirEntry> files;
    if (!logstore::ListDirectory(sub.Get(), &files, &err)) continue;
    for (const logstore::DirEntry& f : files) {
      if (f.kind != logstore::DirEntry::Kind::kRegular) continue;
      const schema::ParsedLogFileName parsed = schema::ParseLogFileName(f.name);
      if (parsed.kind == schema::LogFileKind::kOther || parsed.kind == schema::LogFileKind::kTemp) {
        continue;
      }
      StreamFiles& s = (*out)[date.name + "/" + parsed.base];
      s.date = date.name;
      s.base = parsed.base;
      switch (parsed.kind) {
        case schema::LogFileKind::kActive:
          s.active = true;
          break;
        case schema::LogFileKind::kPlainSegment:
          s.closed.emplace(parsed.index, false);  // a compressed copy, when listed, wins
          break;
        case schema::LogFileKind::kCompressedSegment:
          s.closed[parsed.index] = true;
          break;
        default:
          break;
      }
    }
  }
  return true;
}

struct SegmentReader::Zstd {
  ZSTD_DStream* stream = ZSTD_createDStream();
  std::vector<char> in = std::vector<char>(ZSTD_DStreamInSize());
  ZSTD_inBuffer input{in.data(), 0, 0};
  std::vector<char> out = std::vector<char>(ZSTD_DStreamOutSize());
  bool input_done = false;
  size_t last_ret = 0;  // 0: the last frame decoded is complete
  ~Zstd() { ZSTD_freeDStream(stream); }
};

SegmentReader::SegmentReader(int fd, bool compressed) : fd_(fd), compressed_(compressed) {}
SegmentReader::~SegmentReader() = default;

std::unique_ptr<SegmentReader> SegmentReader::Open(const logstore::FileAt& file, bool compressed,
                                                   uint64_t offset, std::string* error) {
  const int fd = logstore::OpenAt(file, O_RDONLY);
  if (fd < 0) {
    const int err = errno;
    *error = "cannot open " + file.shown + ": " + std::strerror(err);
    errno = err;
    return nullptr;
  }
  std::unique_ptr<SegmentReader> r(new SegmentReader(fd, compressed));
  struct stat st {};
  if (::fstat(fd, &st) == 0) r->inode_ = st.st_ino;
  r->offset_ = offset;
  if (compressed) {
    r->zstd_ = std::make_unique<Zstd>();
    if (r->zstd_->stream == nullptr) {
      *error = "cannot read " + file.shown + ": out of memory for zstd";
      return nullptr;
    }
    ZSTD_initDStream(r->zstd_->stream);
    r->skip_ = offset;
  } else {
    r->file_pos_ = offset;
    r->produced_ = offset;
  }
  return r;
}

uint64_t SegmentReader::Remaining() const {
  struct stat st {};
  if (::fstat(fd_.Get(), &st) != 0) return 0;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (compressed_) return size > file_pos_ ? size - file_pos_ : 0;
  return size > offset_ ? size - offset_ : 0;
}

bool SegmentReader::Fill(std::string* error, bool* failed) {
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  if (!compressed_) {
    const size_t old = buf_.size();
    buf_.resize(old + kChunk);
    ssize_t n;
    do {
      n = ::pread(fd_.Get(), buf_.data() + old, kChunk, static_cast<off_t>(file_pos_));
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      buf_.resize(old);
      *error = std::string("read: ") + std::strerror(errno);
      *failed = true;
      return false;
    }
    buf_.resize(old + static_cast<size_t>(n));
    file_pos_ += static_cast<uint64_t>(n);
    produced_ += static_cast<uint64_t>(n);
    return n > 0;
  }
  Zstd& z = *zstd_;
  for (;;) {
    if (z.input.pos == z.input.size) {
      if (z.input_done) {
        if (z.last_ret != 0) {
          *error = "the zstd file ends inside a frame";
          *failed = true;
        }
        return false;
      }
      ssize_t n;
      do {
        n = ::pread(fd_.Get(), z.in.data(), z.in.size(), static_cast<off_t>(file_pos_));
      } while (n < 0 && errno == EINTR);
      if (n < 0) {
        *error = std::string("read: ") + std::strerror(errno);
        *failed = true;
        return false;
      }
      if (n == 0) {
        z.input_done = true;
        continue;
      }
      file_pos_ += static_cast<uint64_t>(n);
      z.input = ZSTD_inBuffer{z.in.data(), static_cast<size_t>(n), 0};
    }
    ZSTD_outBuffer output{z.out.data(), z.out.size(), 0};
    const size_t ret = ZSTD_decompressStream(z.stream, &output, &z.input);
    if (ZSTD_isError(ret)) {
      *error = std::string("zstd: ") + ZSTD_getErrorName(ret);
      *failed = true;
      return false;
    }
    z.last_ret = ret;
    size_t start = 0;
    if (skip_ > 0) {
      start = static_cast<size_t>(std::min<uint64_t>(skip_, output.pos));
      skip_ -= start;
    }
    produced_ += output.pos;
    if (output.pos > start) {
      buf_.append(z.out.data() + start, output.pos - start);
      return true;
    }
  }
}

SegmentReader::Status SegmentReader::Next(std::string_view* line, std::string* error) {
  for (;;) {
    const size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      const size_t length = nl + 1 - pos_;
      offset_ += length;
      *line = std::string_view(buf_).substr(pos_, nl - pos_);
      pos_ = nl + 1;
      if (skipping_long_) {
        skipping_long_ = false;
        return Status::kLongLine;
      }
      return Status::kLine;
    }
    if (buf_.size() - pos_ > kMaxLineBytes) {
      // Part of a line too long to be an event: dropped, the rest skipped up to its newline.
      offset_ += buf_.size() - pos_;
      buf_.clear();
      pos_ = 0;
      skipping_long_ = true;
    }
    bool failed = false;
    if (!Fill(error, &failed)) return failed ? Status::kError : Status::kEnd;
  }
}

}  // namespace cuflight::exporter
