// Helpers shared by the log sink tests: file reading, and an
// independent zstd decoder (libzstd's one-shot API, not the sink's streaming reader).
#ifndef CUFLIGHT_TESTS_COLLECTOR_LOG_SINK_TEST_UTIL_H_
#define CUFLIGHT_TESTS_COLLECTOR_LOG_SINK_TEST_UTIL_H_

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "temp_dir.h"

namespace cuflight::collector::testing {

using test_support::TempDir;  // tests/support/temp_dir.h

// The whole file; "" if it cannot be read (the tests check existence separately).
std::string ReadFile(const std::filesystem::path& path);
void WriteFile(const std::filesystem::path& path, std::string_view content);

// One-shot zstd decompression with libzstd; fails the current test on error.
std::string ZstdDecompress(const std::filesystem::path& path);
// One-shot zstd compression (level 3) of `content` into `path`.
void ZstdCompressTo(const std::filesystem::path& path, std::string_view content);

// Regular files under `dir`, recursively, as paths relative to `dir`, sorted; hidden files
// (the sink's lock file) are left out.
std::vector<std::string> ListFiles(const std::filesystem::path& dir);

// Lines of `text` without their '\n'; a final unterminated piece is returned as a line too.
std::vector<std::string> SplitLines(std::string_view text);

// {"type":"kernel","version":1,"seq":<seq>,"pad":"<pad_bytes x 'a'..'z'>"}\n
std::string MakeLine(uint64_t seq, size_t pad_bytes = 16);

// Sets a file's mtime (and atime) with utimensat(2).
void SetMtime(const std::filesystem::path& path, std::chrono::system_clock::time_point when);

}  // namespace cuflight::collector::testing

#endif  // CUFLIGHT_TESTS_COLLECTOR_LOG_SINK_TEST_UTIL_H_
