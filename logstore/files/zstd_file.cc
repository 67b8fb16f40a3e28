#include "zstd_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
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

bool DecompressFd(int fd, const std::string& shown,
                  const std::function<void(std::string_view)>& sink, std::string* error) {
  std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx(ZSTD_createDCtx());
  if (!dctx) {
    *error = "cannot create a zstd decompression context";
    return false;
  }
  std::vector<char> in_buf(ZSTD_DStreamInSize());
  std::vector<char> out_buf(ZSTD_DStreamOutSize());
  size_t last_ret = 0;  // 0 = at a frame boundary
  for (;;) {
    const ssize_t n = ReadSome(fd, in_buf.data(), in_buf.size());
    if (n < 0) {
      *error = RateLimitedLog::Describe("cannot read", shown, errno);
      return false;
    }
    if (n == 0) break;
    ZSTD_inBuffer input{in_buf.data(), static_cast<size_t>(n), 0};
    while (input.pos < input.size) {
      ZSTD_outBuffer output{out_buf.data(), out_buf.size(), 0};
      last_ret = ZSTD_decompressStream(dctx.get(), &output, &input);
      if (ZSTD_isError(last_ret)) {
        *error = "zstd decompression of " + shown + " failed: " + ZSTD_getErrorName(last_ret);
        return false;
      }
      if (output.pos > 0) sink(std::string_view(out_buf.data(), output.pos));
    }
  }
  // Flush what zstd may still hold for the last frame.
  for (;;) {
    ZSTD_inBuffer input{nullptr, 0, 0};
    ZSTD_outBuffer output{out_buf.data(), out_buf.size(), 0};
    if (last_ret == 0) break;
    last_ret = ZSTD_decompressStream(dctx.get(), &output, &input);
    if (ZSTD_isError(last_ret)) {
      *error = "zstd decompression of " + shown + " failed: " + ZSTD_getErrorName(last_ret);
      return false;
    }
    if (output.pos > 0) {
      sink(std::string_view(out_buf.data(), output.pos));
    } else {
      break;
    }
  }
  if (last_ret != 0) {
    *error = shown + " ends inside a zstd frame (truncated)";
    return false;
  }
  return true;
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
