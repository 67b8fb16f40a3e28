// ExpandLogPaths: command-line paths -> the log files to read, in reading order.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>

#include "cuflight/logread/log_reader.h"
#include "cuflight/schema/log_layout.h"

namespace cuflight::logread {
namespace {

namespace fs = std::filesystem;

bool IsLogName(std::string_view name) {
  return name.ends_with(".jsonl") || name.ends_with(".jsonl.zst");
}

// Reading order: by directory, then by collector stream base (so one stream's files stay
// together), then segments by number with the active file (index 0) last, then by name.
struct OrderKey {
  std::string dir;
  std::string base;
  bool active = false;
  uint64_t index = 0;
  std::string name;

  bool operator<(const OrderKey& o) const {
    return std::tie(dir, base, active, index, name) <
           std::tie(o.dir, o.base, o.active, o.index, o.name);
  }
};

OrderKey KeyOf(const fs::path& file) {
  OrderKey key;
  key.dir = file.parent_path().native();
  key.name = file.filename().native();
  const schema::ParsedLogFileName parsed = schema::ParseLogFileName(key.name);
  switch (parsed.kind) {
    case schema::LogFileKind::kActive:
    case schema::LogFileKind::kPlainSegment:
    case schema::LogFileKind::kCompressedSegment:
      key.base = parsed.base;
      key.active = parsed.kind == schema::LogFileKind::kActive;
      key.index = parsed.index;
      break;
    default:
      key.base = key.name;
      break;
  }
  return key;
}

std::string Describe(const std::error_code& ec) { return ec.message(); }

}  // namespace

bool ExpandLogPaths(const std::vector<std::string>& paths, std::vector<fs::path>* files,
                    std::string* error) {
  files->clear();
  if (paths.empty()) {
    *error = "no log path given";
    return false;
  }
  std::vector<fs::path> found;
  for (const std::string& arg : paths) {
    const fs::path path(arg);
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec || !fs::exists(status)) {
      *error = fmt::format("{}: {}", arg,
                           ec && ec != std::errc::no_such_file_or_directory
                               ? Describe(ec)
                               : std::string("no such file or directory"));
      return false;
    }
    if (fs::is_regular_file(status)) {
      found.push_back(path);
      continue;
    }
    if (!fs::is_directory(status)) {
      *error = fmt::format("{}: not a file or directory", arg);
      return false;
    }
    size_t in_dir = 0;
    size_t empty_in_dir = 0;
    fs::recursive_directory_iterator it(path, fs::directory_options::none, ec);
    if (ec) {
      *error = fmt::format("{}: cannot read the directory: {}", arg, Describe(ec));
      return false;
    }
    for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
      if (ec) break;
      std::error_code type_ec;
      if (!it->is_regular_file(type_ec) || type_ec) continue;
      if (!IsLogName(it->path().filename().native())) continue;
      // The collector's active file is empty right after a rotation: nothing to read, no error.
      if (it->file_size(type_ec) == 0 && !type_ec) {
        ++empty_in_dir;
        continue;
      }
      found.push_back(it->path());
      ++in_dir;
    }
    if (ec) {
      *error = fmt::format("{}: cannot read the directory: {}", arg, Describe(ec));
      return false;
    }
    if (in_dir == 0) {
      *error = empty_in_dir > 0
                   ? fmt::format("{}: the cuflight logs in this directory are all empty", arg)
                   : fmt::format("{}: no cuflight log in this directory (*.jsonl, *.jsonl.zst)",
                                 arg);
      return false;
    }
  }
  // The same file named twice (a directory and a file in it, or two spellings) is read once.
  std::vector<std::pair<OrderKey, fs::path>> keyed;
  std::set<fs::path> seen;
  for (const fs::path& file : found) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(file, ec);
    if (ec) canonical = fs::absolute(file, ec).lexically_normal();
    if (!seen.insert(std::move(canonical)).second) continue;
    keyed.emplace_back(KeyOf(file), file);
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [key, file] : keyed) files->push_back(std::move(file));
  return true;
}

}  // namespace cuflight::logread
