#include "cuflight/schema/log_layout.h"

#include <charconv>
#include <chrono>
#include <cstdio>

namespace cuflight::schema {
namespace {

constexpr std::string_view kActiveSuffix = ".jsonl";
constexpr std::string_view kCompressedSuffix = ".jsonl.zst";
constexpr std::string_view kTempSuffix = ".jsonl.zst.tmp";

bool IsKeptByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '+' || c == '-';
}

// Splits "<base>.<digits>" into base and a segment number >= 1; false if `stem` is not of
// that form.
bool SplitSegmentStem(std::string_view stem, std::string_view* base, uint64_t* index) {
  const size_t dot = stem.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const std::string_view digits = stem.substr(dot + 1);
  if (digits.empty() || digits.size() > 20) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  uint64_t value = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || value == 0) return false;
  *base = stem.substr(0, dot);
  *index = value;
  return true;
}

}  // namespace

std::string SanitizeNameComponent(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() < kMaxNameComponentBytes ? raw.size() : kMaxNameComponentBytes);
  for (char c : raw) {
    if (out.size() == kMaxNameComponentBytes) break;
    out.push_back(IsKeptByte(static_cast<unsigned char>(c)) ? c : '_');
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '-')) out[0] = '_';
  if (out.empty()) out = "unknown";
  return out;
}

std::string_view ExeBaseName(std::string_view exe) {
  while (!exe.empty() && exe.back() == '/') exe.remove_suffix(1);
  const size_t slash = exe.rfind('/');
  return slash == std::string_view::npos ? exe : exe.substr(slash + 1);
}

std::string StartDate(int64_t start_ns) {
  using std::chrono::days;
  using std::chrono::nanoseconds;
  if (start_ns < 0) start_ns = 0;
  const std::chrono::sys_days day =
      std::chrono::floor<days>(std::chrono::sys_time<nanoseconds>(nanoseconds(start_ns)));
  const std::chrono::year_month_day ymd(day);
  char buf[32];
  (void)std::snprintf(buf, sizeof(buf), "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                      static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  return buf;
}

std::string StreamBaseName(std::string_view host, std::string_view exe, int32_t pid,
                           int64_t start_ns) {
  std::string base = SanitizeNameComponent(host);
  base += '-';
  base += SanitizeNameComponent(ExeBaseName(exe));
  base += '-';
  base += std::to_string(pid);
  base += '-';
  base += std::to_string(start_ns);
  return base;
}

std::string ActiveFileName(std::string_view base) {
  std::string name(base);
  name += kActiveSuffix;
  return name;
}

std::string SegmentFileName(std::string_view base, uint64_t index, bool compressed) {
  char digits[32];
  (void)std::snprintf(digits, sizeof(digits), ".%06llu", static_cast<unsigned long long>(index));
  std::string name(base);
  name += digits;
  name += compressed ? kCompressedSuffix : kActiveSuffix;
  return name;
}

bool IsDateDirName(std::string_view name) {
  if (name.size() != 10) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool dash = i == 4 || i == 7;
    if (dash ? name[i] != '-' : (name[i] < '0' || name[i] > '9')) return false;
  }
  return true;
}

ParsedLogFileName ParseLogFileName(std::string_view name) {
  ParsedLogFileName parsed;
  std::string_view base;
  uint64_t index = 0;
  if (name.ends_with(kTempSuffix)) {
    if (SplitSegmentStem(name.substr(0, name.size() - kTempSuffix.size()), &base, &index)) {
      parsed.kind = LogFileKind::kTemp;
    }
  } else if (name.ends_with(kCompressedSuffix)) {
    if (SplitSegmentStem(name.substr(0, name.size() - kCompressedSuffix.size()), &base, &index)) {
      parsed.kind = LogFileKind::kCompressedSegment;
    }
  } else if (name.ends_with(kActiveSuffix)) {
    const std::string_view stem = name.substr(0, name.size() - kActiveSuffix.size());
    if (SplitSegmentStem(stem, &base, &index)) {
      parsed.kind = LogFileKind::kPlainSegment;
    } else if (!stem.empty()) {
      parsed.kind = LogFileKind::kActive;
      base = stem;
    }
  }
  if (parsed.kind != LogFileKind::kOther) {
    parsed.base = std::string(base);
    parsed.index = index;
  }
  return parsed;
}

}  // namespace cuflight::schema
