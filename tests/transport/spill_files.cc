#include "spill_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

namespace cuflight::transport::testing {

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!in.eof()) line += '\n';
    lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> FileNames(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> StreamFiles(const std::string& date_dir, const std::string& base) {
  std::map<unsigned long long, std::string> segments;
  std::string active;
  for (const std::string& name : FileNames(date_dir)) {
    if (name == base + ".jsonl") {
      active = date_dir + "/" + name;
      continue;
    }
    const std::string prefix = base + ".";
    const std::string suffix = ".jsonl";
    if (name.size() < prefix.size() + 6 + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.substr(name.size() - suffix.size()) != suffix) {
      continue;
    }
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    segments[std::stoull(digits)] = date_dir + "/" + name;
  }
  std::vector<std::string> out;
  for (const auto& [index, path] : segments) out.push_back(path);
  if (!active.empty()) out.push_back(active);
  return out;
}

}  // namespace cuflight::transport::testing
