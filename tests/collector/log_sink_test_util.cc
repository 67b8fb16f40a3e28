#include "log_sink_test_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zstd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace cuflight::collector::testing {

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFile(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string ZstdDecompress(const std::filesystem::path& path) {
  const std::string compressed = ReadFile(path);
  const unsigned long long size = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    ADD_FAILURE() << path << ": not a zstd frame with a known content size";
    return {};
  }
  std::string out(size, '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), compressed.data(), compressed.size());
  if (ZSTD_isError(n)) {
    ADD_FAILURE() << path << ": " << ZSTD_getErrorName(n);
    return {};
  }
  out.resize(n);
  return out;
}

void ZstdCompressTo(const std::filesystem::path& path, std::string_view content) {
  std::string out(ZSTD_compressBound(content.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), content.data(), content.size(), 3);
  ASSERT_FALSE(ZSTD_isError(n));
  out.resize(n);
  WriteFile(path, out);
}

std::vector<std::string> ListFiles(const std::filesystem::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file() && !it->path().filename().string().starts_with('.')) {
      files.push_back(std::filesystem::relative(it->path(), dir).string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      lines.emplace_back(text.substr(start));
      break;
    }
    lines.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

std::string MakeLine(uint64_t seq, size_t pad_bytes) {
  std::string pad;
  pad.reserve(pad_bytes);
  for (size_t i = 0; i < pad_bytes; ++i) pad.push_back(static_cast<char>('a' + (seq + i) % 26));
  return R"({"type":"kernel","version":1,"seq":)" + std::to_string(seq) + R"(,"pad":")" + pad +
         "\"}\n";
}

void SetMtime(const std::filesystem::path& path, std::chrono::system_clock::time_point when) {
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  struct timespec times[2];
  times[0].tv_sec = static_cast<time_t>(ns / 1000000000);
  times[0].tv_nsec = static_cast<long>(ns % 1000000000);
  times[1] = times[0];
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

}  // namespace cuflight::collector::testing
