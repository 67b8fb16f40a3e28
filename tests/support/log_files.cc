#include "log_files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "cuflight/schema/config_expander.h"
#include "cuflight/schema/decoder.h"
#include "cuflight/schema/encoder.h"

namespace cuflight::test_support {
namespace {

std::string ReadAll(const std::filesystem::path& file) {
  std::string all;
  if (FILE* f = std::fopen(file.c_str(), "rb")) {
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) all.append(buf, n);
    std::fclose(f);
  }
  return all;
}

}  // namespace

std::vector<std::filesystem::path> LogFiles(const std::filesystem::path& log_dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(log_dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && it->path().extension() == ".jsonl") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<LoggedLine> ReadLog(const std::filesystem::path& file) {
  std::vector<LoggedLine> lines;
  const std::string all = ReadAll(file);
  size_t start = 0;
  while (start < all.size()) {
    const size_t nl = all.find('\n', start);
    if (nl == std::string::npos) break;  // a last line still being written
    LoggedLine line;
    line.text = all.substr(start, nl - start);
    start = nl + 1;
    const nlohmann::json j = nlohmann::json::parse(line.text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j.contains("seq") ||
        !j.contains("pid")) {
      ADD_FAILURE() << file << ": bad line: " << line.text.substr(0, 200);
      continue;
    }
    line.type = j["type"].get<std::string>();
    line.pid = j["pid"].get<int64_t>();
    line.seq = j["seq"].get<uint64_t>();
    lines.push_back(std::move(line));
  }
  return lines;
}

std::filesystem::path FindLog(const std::filesystem::path& log_dir, std::string_view exe_base,
                              int32_t pid) {
  std::string needle = "-";
  needle.append(exe_base);
  needle += '-';
  needle += std::to_string(pid);
  needle += '-';
  std::filesystem::path found;
  int count = 0;
  for (const auto& file : LogFiles(log_dir)) {
    if (file.filename().string().find(needle) != std::string::npos) {
      found = file;
      ++count;
    }
  }
  return count == 1 ? found : std::filesystem::path();
}

std::vector<std::string> StoredLines(const std::filesystem::path& log_dir) {
  std::vector<std::string> lines;
  for (const auto& file : LogFiles(log_dir)) {
    const std::string all = ReadAll(file);
    size_t start = 0;
    for (size_t nl; (nl = all.find('\n', start)) != std::string::npos; start = nl + 1) {
      lines.push_back(all.substr(start, nl - start));
    }
  }
  return lines;
}

std::vector<uint64_t> StoredSeqs(const std::filesystem::path& log_dir, int64_t pid) {
  std::vector<uint64_t> seqs;
  for (const auto& file : LogFiles(log_dir)) {
    for (const LoggedLine& line : ReadLog(file)) {
      if (line.pid == pid && line.type != "process_lost") seqs.push_back(line.seq);
    }
  }
  return seqs;
}

std::vector<uint64_t> StoredSeqs(const std::vector<LoggedLine>& lines) {
  std::vector<uint64_t> seqs;
  for (const LoggedLine& line : lines) {
    if (line.type != "process_lost") seqs.push_back(line.seq);
  }
  return seqs;
}

std::vector<uint64_t> Range(uint64_t first, uint64_t last) {
  std::vector<uint64_t> seqs;
  for (uint64_t seq = first; seq <= last; ++seq) seqs.push_back(seq);
  return seqs;
}

std::vector<schema::OwnedEvent> DecodeLog(const std::filesystem::path& file) {
  std::vector<schema::OwnedEvent> events;
  const std::string all = ReadAll(file);
  schema::ConfigExpander configs;
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\n', start);
    if (end == std::string::npos) break;  // a last line still being written
    ++end;
    schema::DecodeResult d = schema::Decode(std::string_view(all).substr(start, end - start));
    EXPECT_TRUE(d.ok()) << file << ": " << d.message;
    start = end;
    if (!d.ok()) continue;
    // A reader's view (docs/protocol.md, "Interned configurations"): a file is a sequence, its
    // descriptions remembered, its launches expanded into the kernel events they stand for.
    const schema::ExpandVerdict verdict = configs.Feed(&d.event);
    EXPECT_FALSE(schema::Refused(verdict)) << file << ": " << schema::ExpandVerdictName(verdict);
    if (verdict == schema::ExpandVerdict::kDescribed || schema::Refused(verdict)) continue;
    events.push_back(std::move(d.event));
  }
  return events;
}

std::vector<std::string> ExpandedLines(const std::filesystem::path& log_dir) {
  std::vector<std::string> lines;
  std::string encoded(64 << 10, '\0');
  for (const auto& file : LogFiles(log_dir)) {
    const std::string all = ReadAll(file);
    schema::ConfigExpander configs;
    size_t start = 0;
    while (start < all.size()) {
      size_t end = all.find('\n', start);
      if (end == std::string::npos) break;  // a last line still being written
      const std::string_view line = std::string_view(all).substr(start, end - start);
      start = end + 1;
      schema::DecodeResult d = schema::Decode(line);
      const bool interned = d.ok() && (std::holds_alternative<schema::OwnedKernelConfigEvent>(
                                           d.event) ||
                                       std::holds_alternative<schema::OwnedLaunchEvent>(d.event));
      if (!interned) {
        lines.emplace_back(line);
        continue;
      }
      const schema::ExpandVerdict verdict = configs.Feed(&d.event);
      EXPECT_FALSE(schema::Refused(verdict)) << file << ": " << schema::ExpandVerdictName(verdict);
      if (verdict == schema::ExpandVerdict::kDescribed || schema::Refused(verdict)) continue;
      const size_t n = schema::Encode(d.event, encoded.data(), encoded.size());
      EXPECT_GT(n, 0u) << file << ": " << line;
      lines.emplace_back(encoded.data(), n == 0 ? 0 : n - 1);  // without its '\n'
    }
  }
  return lines;
}

std::vector<schema::OwnedEvent> DecodeLogs(const std::filesystem::path& log_dir) {
  std::vector<schema::OwnedEvent> events;
  for (const auto& file : LogFiles(log_dir)) {
    std::vector<schema::OwnedEvent> more = DecodeLog(file);
    events.insert(events.end(), std::make_move_iterator(more.begin()),
                  std::make_move_iterator(more.end()));
  }
  return events;
}

}  // namespace cuflight::test_support
