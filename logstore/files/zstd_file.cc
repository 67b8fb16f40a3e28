#include "zstd_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY  // the buffer-less decompression API (DecompressFd)
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "segment_error_log.h"
#include "segment_file.h"

namespace cuflight::logstore {
namespace {

// Reads of the plain segment: large enough that the read syscalls cost nothing next to the
// compression.
constexpr size_t kReadChunkBytes = 1 << 20;

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

ssize_t ReadSome(int fd, char* buf, size_t size) {
  for (;;) {
    const ssize_t n = ::read(fd, buf, size);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

bool CompressInto(int in, int out, off_t src_size, int level, const std::string& src_name,
                  const std::string& tmp_name, std::string* error) {
  std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  if (!cctx) {
    *error = "cannot create a zstd compression context";
    return false;
  }
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setPledgedSrcSize(cctx.get(), static_cast<unsigned long long>(src_size));
  std::vector<char> in_buf(kReadChunkBytes);
  std::vector<char> out_buf(ZSTD_CStreamOutSize());
  uint64_t total_in = 0;
  bool last = false;
  while (!last) {
    const ssize_t n = ReadSome(in, in_buf.data(), in_buf.size());
    if (n < 0) {
      *error = RateLimitedLog::Describe("cannot read", src_name, errno);
      return false;
    }
    total_in += static_cast<uint64_t>(n);
    // The file may not change after rotation; reading to EOF past the pledged size (a writer
    // that should not exist) would make zstd fail, so stop at the size seen when starting.
    last = n == 0 || total_in >= static_cast<uint64_t>(src_size);
    ZSTD_inBuffer input{in_buf.data(), static_cast<size_t>(n), 0};
    const ZSTD_EndDirective mode = last ? ZSTD_e_end : ZSTD_e_continue;
    bool done = false;
    while (!done) {
      ZSTD_outBuffer output{out_buf.data(), out_buf.size(), 0};
      const size_t remaining = ZSTD_compressStream2(cctx.get(), &output, &input, mode);
      if (ZSTD_isError(remaining)) {
        *error = "zstd compression of " + src_name + " failed: " + ZSTD_getErrorName(remaining);
        return false;
      }
      int err = 0;
      if (WriteFully(out, out_buf.data(), output.pos, &err) != output.pos) {
        *error = RateLimitedLog::Describe("cannot write", tmp_name, err);
        return false;
      }
      done = last ? remaining == 0 : input.pos == input.size;
    }
  }
  return true;
}

}  // namespace

bool CompressFileAtomically(const FileAt& src, const FileAt& dst, int level, std::string* error) {
  const FileAt tmp{dst.dir, dst.name + ".tmp", dst.shown + ".tmp"};
  ScopedFd in(OpenAt(src, O_RDONLY));
  if (in.Get() < 0) {
    *error = RateLimitedLog::Describe("cannot open", src.shown, errno);
    return false;
  }
  struct stat st {};
  if (::fstat(in.Get(), &st) != 0) {
    *error = RateLimitedLog::Describe("cannot stat", src.shown, errno);
    return false;
  }
  ScopedFd out(OpenAt(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600));
  if (out.Get() < 0) {
    *error = RateLimitedLog::Describe("cannot create", tmp.shown, errno);
    return false;
  }
  bool ok = CompressInto(in.Get(), out.Get(), st.st_size, level, src.shown, tmp.shown, error);
  if (ok && ::fsync(out.Get()) != 0) {
    *error = RateLimitedLog::Describe("cannot fsync", tmp.shown, errno);
    ok = false;
  }
  if (!out.Close() && ok) {
    *error = RateLimitedLog::Describe("cannot close", tmp.shown, errno);
    ok = false;
  }
  if (ok && ::renameat(tmp.dir, tmp.name.c_str(), dst.dir, dst.name.c_str()) != 0) {
    *error = RateLimitedLog::Describe("cannot rename", tmp.shown, errno);
    ok = false;
  }
  if (!ok) {
    ::unlinkat(tmp.dir, tmp.name.c_str(), 0);
    return false;
  }
  FsyncDirectory(dst.dir);
  return true;
}

bool CompressFileAtomically(const std::filesystem::path& src, const std::filesystem::path& dst,
                            int level, std::string* error) {
  auto open_parent = [](const std::filesystem::path& p) {
    const std::filesystem::path parent = p.parent_path();
    return ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  };
  ScopedFd src_dir(open_parent(src));
  ScopedFd dst_dir(open_parent(dst));
  if (src_dir.Get() < 0 || dst_dir.Get() < 0) {
    *error = RateLimitedLog::Describe("cannot open the directory of",
                                      (src_dir.Get() < 0 ? src : dst).native(), errno);
    return false;
  }
  return CompressFileAtomically(FileAt{src_dir.Get(), src.filename().native(), src.native()},
                                FileAt{dst_dir.Get(), dst.filename().native(), dst.native()}, level,
                                error);
}

namespace {

// Reading a segment decodes each block straight into the buffer the sink reads, through zstd's
// buffer-less streaming API (zstd.h, "Buffer-less streaming decompression (synchronous mode)";
// static-linking-only, hence ZSTD_STATIC_LINKING_ONLY above the include). ZSTD_decompressStream
// decodes into a round buffer of its own and then copies every byte into the caller's output: on
// a segment of launches that copy was 6 % of a report's instructions (docs/performance.md).
//
// 1. The round buffer is ZSTD_decodingBufferSize_min(windowSize, frameContentSize) bytes, the
//    size ZSTD_decompressStream gives its own: each block is decoded next to the previous one,
//    and when fewer than the frame's blockSizeMax bytes are left the next one starts over at the
//    beginning ("decoding can resume from the beginning of the buffer"), as zstd's own stream
//    does (lib/decompress/zstd_decompress.c, zdss_flush: only when the buffer is smaller than the
//    frame's content; a frame that fits is decoded in one pass through it). A block's output goes to the sink as
//    soon as it is decoded, so nothing is overwritten before it was passed on ("already decoded
//    data stored in the buffer should be flushed before being overwritten").
// 2. The frame is checked as ZSTD_decompressStream checks it: ZSTD_decompressContinue verifies
//    the content checksum when the frame has one (its ZSTDds_checkChecksum stage), and a frame
//    whose window is larger than ZSTD_decompressStream accepts by default
//    (ZSTD_WINDOWLOG_LIMIT_DEFAULT: "windowSize ... check that values remain within valid
//    application range") is refused with zstd's own error before any buffer is made for it.
// 3. Skippable frames (magic 0x184D2A5?, a 4-byte size, that many bytes) are skipped here, their
//    content read and dropped a buffer at a time, without giving it to zstd.
// 4. Input: ZSTD_decompressContinue takes exactly ZSTD_nextSrcSizeToDecompress() bytes at once
//    (a block header, then a block of at most 128 KiB compressed). The file is read in chunks of
//    kInBytes; the few bytes of a block that straddle two reads are moved to the buffer's front
//    before the next read.
constexpr size_t kInBytes = 1 << 20;

class FrameInput {
 public:
  FrameInput(int fd, const std::string& shown) : fd_(fd), shown_(shown), buf_(kInBytes) {}

  const char* data() const { return buf_.data() + begin_; }
  size_t size() const { return end_ - begin_; }
  void Consume(size_t n) { begin_ += n; }

  // Makes at least n bytes available, reading as needed: true when there are, false at the end
  // of the file with fewer. False with *error set when the file cannot be read.
  bool Fill(size_t n, bool* read_error, std::string* error) {
    if (size() >= n) return true;
    if (n > buf_.size()) buf_.resize(n);
    std::memmove(buf_.data(), data(), size());
    end_ = size();
    begin_ = 0;
    while (end_ < n && !eof_) {
      const ssize_t got = ReadSome(fd_, buf_.data() + end_, buf_.size() - end_);
      if (got < 0) {
        *error = RateLimitedLog::Describe("cannot read", shown_, errno);
        *read_error = true;
        return false;
      }
      if (got == 0) eof_ = true;
      end_ += static_cast<size_t>(got);
    }
    return end_ >= n;
  }

 private:
  int fd_;
  const std::string& shown_;
  std::vector<char> buf_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
};

bool DecompressFd(int fd, const std::string& shown,
                  const std::function<void(std::string_view)>& sink, std::string* error) {
  std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  if (!dctx) {
    *error = "cannot create a zstd decompression context";
    return false;
  }
  const auto failed_with = [&](const char* why) {
    *error = "zstd decompression of " + shown + " failed: " + why;
    return false;
  };
  const auto failed = [&](size_t code) { return failed_with(ZSTD_getErrorName(code)); };
  const auto truncated = [&] {
    *error = shown + " ends inside a zstd frame (truncated)";
    return false;
  };
  FrameInput in(fd, shown);
  bool read_error = false;
  std::unique_ptr<char[]> out;  // the round buffer (1.)
  size_t out_size = 0;
  for (;;) {  // one frame at a time
    if (!in.Fill(1, &read_error, error)) return !read_error;  // the end, between frames
    ZSTD_frameHeader header{};
    size_t need = ZSTD_getFrameHeader(&header, in.data(), in.size());
    while (need > 0 && !ZSTD_isError(need)) {
      if (!in.Fill(need, &read_error, error)) return read_error ? false : truncated();
      need = ZSTD_getFrameHeader(&header, in.data(), in.size());
    }
    if (ZSTD_isError(need)) return failed(need);
    if (header.frameType == ZSTD_skippableFrame) {  // 3.
      // ZSTD_getFrameHeader says a skippable frame's content size and leaves headerSize 0.
      uint64_t skip = ZSTD_SKIPPABLEHEADERSIZE + header.frameContentSize;
      while (skip > 0) {
        if (!in.Fill(1, &read_error, error)) return read_error ? false : truncated();
        const size_t n = static_cast<size_t>(std::min<uint64_t>(skip, in.size()));
        in.Consume(n);
        skip -= n;
      }
      continue;
    }
    if (header.windowSize > (uint64_t{1} << ZSTD_WINDOWLOG_LIMIT_DEFAULT)) {  // 2.
      return failed_with(ZSTD_getErrorString(ZSTD_error_frameParameter_windowTooLarge));
    }
    const size_t size = ZSTD_decodingBufferSize_min(header.windowSize, header.frameContentSize);
    if (ZSTD_isError(size)) return failed(size);
    if (size > out_size) {
      out.reset();  // the old buffer goes before the new one comes
      out.reset(new char[size]);
      out_size = size;
    }
    const size_t begun = ZSTD_decompressBegin(dctx.get());
    if (ZSTD_isError(begun)) return failed(begun);
    size_t pos = 0;
    while ((need = ZSTD_nextSrcSizeToDecompress(dctx.get())) != 0) {
      if (!in.Fill(need, &read_error, error)) return read_error ? false : truncated();
      // 1.: only a buffer smaller than the frame's content wraps (one that holds it all is
      // filled once, its last block in the room that is left).
      if (size < header.frameContentSize && size - pos < header.blockSizeMax) pos = 0;
      const size_t n = ZSTD_decompressContinue(dctx.get(), out.get() + pos, size - pos,
                                               in.data(), need);
      if (ZSTD_isError(n)) return failed(n);
      in.Consume(need);
      if (n > 0) {
        sink(std::string_view(out.get() + pos, n));
        pos += n;
      }
    }
  }
}

}  // namespace

bool DecompressFile(const FileAt& src, const std::function<void(std::string_view)>& sink,
                    std::string* error) {
  ScopedFd in(OpenAt(src, O_RDONLY));
  if (in.Get() < 0) {
    *error = RateLimitedLog::Describe("cannot open", src.shown, errno);
    return false;
  }
  return DecompressFd(in.Get(), src.shown, sink, error);
}

bool DecompressFile(const std::filesystem::path& src,
                    const std::function<void(std::string_view)>& sink, std::string* error) {
  ScopedFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.Get() < 0) {
    *error = RateLimitedLog::Describe("cannot open", src.native(), errno);
    return false;
  }
  return DecompressFd(in.Get(), src.native(), sink, error);
}

std::optional<uint64_t> LastSeqInZstdFile(const FileAt& src, std::string* error) {
  constexpr std::string_view kSeqKey = "\"seq\"";
  std::string partial;    // the current, unterminated line
  std::string candidate;  // the last complete line seen that contains kSeqKey
  std::string joined;
  const bool ok = DecompressFile(
      src,
      [&](std::string_view chunk) {
        const size_t last_nl = chunk.rfind('\n');
        if (last_nl == std::string_view::npos) {
          partial.append(chunk);
          return;
        }
        // Complete lines in this chunk, newest first, until one names the member.
        size_t line_end = last_nl;
        for (;;) {
          const size_t prev_nl =
              line_end == 0 ? std::string_view::npos : chunk.rfind('\n', line_end - 1);
          if (prev_nl == std::string_view::npos) {
            joined.assign(partial);
            joined.append(chunk.substr(0, line_end));
            if (joined.find(kSeqKey) != std::string::npos) candidate.swap(joined);
            break;
          }
          const std::string_view line = chunk.substr(prev_nl + 1, line_end - prev_nl - 1);
          if (line.find(kSeqKey) != std::string_view::npos) {
            candidate.assign(line);
            break;
          }
          line_end = prev_nl;
        }
        partial.assign(chunk.substr(last_nl + 1));
      },
      error);
  if (!ok) return std::nullopt;
  return SeqOfLine(candidate);
}

}  // namespace cuflight::logstore
