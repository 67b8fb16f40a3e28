#include "output_file.h"

#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace cuflight::trace {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;

}  // namespace

Compression CompressionOf(std::string_view path) {
  if (path.ends_with(".gz")) return Compression::kGzip;
  if (path.ends_with(".zst")) return Compression::kZstd;
  return Compression::kNone;
}

struct OutputFile::Impl {
  std::string path;
  std::string temp;
  std::FILE* file = nullptr;
  std::ostream* out = nullptr;  // "-"
  Compression compression = Compression::kNone;
  std::string pending;          // bytes not yet compressed or written
  std::vector<char> packed;     // compressed output
  z_stream gz{};
  bool gz_open = false;
  ZSTD_CCtx* zstd = nullptr;
  bool failed = false;
  std::string failure;
  bool closed = false;

  ~Impl() {
    if (gz_open) deflateEnd(&gz);
    if (zstd != nullptr) ZSTD_freeCCtx(zstd);
    if (file != nullptr) std::fclose(file);
    if (!closed && !temp.empty()) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
    }
  }

  bool Emit(const char* data, size_t n, uint64_t* written) {
    if (n == 0) return true;
    if (out != nullptr) {
      out->write(data, static_cast<std::streamsize>(n));
      if (!*out) return Fail("write failed");
    } else if (std::fwrite(data, 1, n, file) != n) {
      return Fail(std::strerror(errno));
    }
    *written += n;
    return true;
  }

  bool Fail(const std::string& why) {
    if (!failed) failure = path + ": cannot write: " + why;
    failed = true;
    return false;
  }
};

OutputFile::OutputFile() : impl_(std::make_unique<Impl>()) {}
OutputFile::~OutputFile() = default;

bool OutputFile::Open(const std::string& path, std::ostream& out, std::string* error) {
  Impl& m = *impl_;
  m.path = path;
  m.pending.reserve(kBufferBytes);
  if (path == "-") {
    m.out = &out;
    return true;
  }
  m.compression = CompressionOf(path);
  m.temp = path + ".tmp." + std::to_string(::getpid());
  m.file = std::fopen(m.temp.c_str(), "wbe");
  if (m.file == nullptr) {
    *error = path + ": cannot write: " + std::strerror(errno);
    m.temp.clear();
    return false;
  }
  m.packed.resize(kBufferBytes);
  if (m.compression == Compression::kGzip) {
    // windowBits 15 + 16: a gzip header and trailer (zlib.h, deflateInit2). The fastest level:
    // a million launches are gigabytes of JSON, and level 1 already takes them ten to one.
    if (deflateInit2(&m.gz, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      *error = path + ": cannot start gzip";
      return false;
    }
    m.gz_open = true;
  } else if (m.compression == Compression::kZstd) {
    m.zstd = ZSTD_createCCtx();
    if (m.zstd == nullptr || ZSTD_isError(ZSTD_CCtx_setParameter(m.zstd, ZSTD_c_compressionLevel, 3)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(m.zstd, ZSTD_c_checksumFlag, 1))) {
      *error = path + ": cannot start zstd";
      return false;
    }
  }
  return true;
}

bool OutputFile::Write(std::string_view bytes) {
  Impl& m = *impl_;
  if (m.failed) return false;
  bytes_in_ += bytes.size();
  m.pending.append(bytes.data(), bytes.size());
  if (m.pending.size() >= kBufferBytes) return Flush();
  return true;
}

bool OutputFile::Flush() {
  Impl& m = *impl_;
  if (m.failed) return false;
  bool ok = true;
  switch (m.compression) {
    case Compression::kNone:
      ok = m.Emit(m.pending.data(), m.pending.size(), &bytes_out_);
      break;
    case Compression::kGzip: {
      m.gz.next_in = reinterpret_cast<Bytef*>(m.pending.data());
      m.gz.avail_in = static_cast<uInt>(m.pending.size());
      do {
        m.gz.next_out = reinterpret_cast<Bytef*>(m.packed.data());
        m.gz.avail_out = static_cast<uInt>(m.packed.size());
        if (deflate(&m.gz, Z_NO_FLUSH) == Z_STREAM_ERROR) return m.Fail("gzip failed");
        ok = m.Emit(m.packed.data(), m.packed.size() - m.gz.avail_out, &bytes_out_);
      } while (ok && m.gz.avail_out == 0);
      break;
    }
    case Compression::kZstd: {
      ZSTD_inBuffer in{m.pending.data(), m.pending.size(), 0};
      while (ok && in.pos < in.size) {
        ZSTD_outBuffer outb{m.packed.data(), m.packed.size(), 0};
        const size_t r = ZSTD_compressStream2(m.zstd, &outb, &in, ZSTD_e_continue);
        if (ZSTD_isError(r)) return m.Fail(ZSTD_getErrorName(r));
        ok = m.Emit(m.packed.data(), outb.pos, &bytes_out_);
      }
      break;
    }
  }
  m.pending.clear();
  return ok;
}

bool OutputFile::Close(std::string* error) {
  Impl& m = *impl_;
  bool ok = Flush();
  if (ok && m.compression == Compression::kGzip) {
    int r;
    do {
      m.gz.next_out = reinterpret_cast<Bytef*>(m.packed.data());
      m.gz.avail_out = static_cast<uInt>(m.packed.size());
      r = deflate(&m.gz, Z_FINISH);
      if (r == Z_STREAM_ERROR) {
        ok = m.Fail("gzip failed");
        break;
      }
      ok = m.Emit(m.packed.data(), m.packed.size() - m.gz.avail_out, &bytes_out_);
    } while (ok && r != Z_STREAM_END);
  } else if (ok && m.compression == Compression::kZstd) {
    ZSTD_inBuffer in{nullptr, 0, 0};
    size_t left;
    do {
      ZSTD_outBuffer outb{m.packed.data(), m.packed.size(), 0};
      left = ZSTD_compressStream2(m.zstd, &outb, &in, ZSTD_e_end);
      if (ZSTD_isError(left)) {
        ok = m.Fail(ZSTD_getErrorName(left));
        break;
      }
      ok = m.Emit(m.packed.data(), outb.pos, &bytes_out_);
    } while (ok && left != 0);
  }
  if (m.out != nullptr) {
    m.out->flush();
    if (!*m.out) ok = m.Fail("write failed");
  } else if (m.file != nullptr) {
    const bool closed_ok = std::fclose(m.file) == 0;
    m.file = nullptr;
    if (ok && !closed_ok) ok = m.Fail(std::strerror(errno));
    if (ok) {
      std::error_code ec;
      std::filesystem::rename(m.temp, m.path, ec);
      if (ec) {
        ok = m.Fail(ec.message());
      } else {
        m.closed = true;
      }
    }
  }
  if (!ok) *error = m.failure;
  return ok;
}

}  // namespace cuflight::trace
